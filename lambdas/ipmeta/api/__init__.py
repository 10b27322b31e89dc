"""The lookup API: powertools resolver, routes and the Lambda handler."""
