//! Fixture programs and shared helpers for the benches and process tests.

pub mod pipe;
pub mod record;
pub mod results;
pub mod shapes;
