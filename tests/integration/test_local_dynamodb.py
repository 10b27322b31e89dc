"""The local DynamoDB survives clients that die mid-request, as DynamoDB does.

dynalite 4.0.0 rethrows a request's stream error, so one aborted request body (a
SIGKILLed `ipmeta load` in the middle of a BatchWriteItem) used to end the whole
process, and every later test or `serve` request got "connection refused".
"""

from __future__ import annotations

import socket
import struct

from ipmeta.schema.settings import Settings
from ipmeta_cli.dynalite import Dynalite
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing


def send_half_a_request_and_vanish(port: int, *, reset: bool) -> None:
    body = b'{"ExclusiveStartTableName":"a-table-name-long-enough"}'
    head = (
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "X-Amz-Target: DynamoDB_20120810.ListTables\r\n"
        "Content-Type: application/x-amz-json-1.0\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    connection = socket.create_connection(("127.0.0.1", port))
    connection.sendall(head + body[: len(body) // 2])
    if reset:  # as the kernel does for a killed process with unread data: RST, not FIN
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


def test_a_request_aborted_mid_body_leaves_the_local_dynamodb_serving() -> None:
    local = Dynalite()
    with local as endpoint:
        store = LoaderTable.from_settings(
            Settings(table_name="survivor", dynamodb_endpoint=endpoint, pointer_cache_seconds=0.0)
        )
        create_table_if_missing(store.client, store.table_name)
        for reset in (False, True, False):
            send_half_a_request_and_vanish(local.port, reset=reset)
            # The next client is answered, by the same process
            assert store.lookup.read_active_version(consistent=True) is None
        assert local.process is not None
        assert local.process.poll() is None
