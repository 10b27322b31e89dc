#!/usr/bin/env node
// dynalite's cli.js, plus one guard: dynalite 4.0.0 (the latest) rethrows every
// request stream error (`req.on('error', function (err) { throw err })`), so one client
// that dies mid-request (a SIGKILLed `ipmeta load`, a Ctrl-C) aborts its request body,
// and the whole local DynamoDB exits with "Error: aborted" (ECONNRESET).
// DynamoDB drops such a request unapplied and keeps serving everyone else; so does this:
// the request never reaches 'end', so dynalite never acts on it.
'use strict'

// One JSON argument, the options of require('dynalite')(options) plus host and port,
// written by ipmeta_cli/dynalite.py.
const options = JSON.parse(process.argv[2] || '{}')
const createServer = require('dynalite')

const server = createServer(options)
const [handleRequest] = server.listeners('request')
server.removeAllListeners('request')
server.on('request', (req, res) => {
  handleRequest(req, res)
  req.removeAllListeners('error')
  req.on('error', (err) => {
    if (err.code !== 'ECONNRESET') throw err
  })
})

server.listen(options.port || 4567, options.host || undefined, () => {
  console.log('Dynalite listening at: http://%s:%s', options.host || 'localhost', server.address().port)
})
