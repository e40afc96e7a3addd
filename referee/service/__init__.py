"""The gRPC service: servicers, protobuf conversion, auth, errors, metrics and the server."""
