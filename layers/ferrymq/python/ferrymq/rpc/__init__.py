"""The binary RPC between the front end and the storage workers: framing, payload codec, client."""
