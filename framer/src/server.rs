//! The server side (placeholder, being written).
