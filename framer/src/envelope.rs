//! The JSON-RPC envelope (placeholder, being written).
