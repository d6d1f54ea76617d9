//! The tokio host transport (placeholder, being written).
