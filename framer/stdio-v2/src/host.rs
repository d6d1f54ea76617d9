//! The `stdio-v2` host.
