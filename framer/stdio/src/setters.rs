//! Chainable `with_*` setters for the public fields of a config struct.
//!
//! The config structs are `#[non_exhaustive]` so that fields can be added
//! without a breaking change; other crates build them from `Default` and
//! these setters. Each setter takes the value and returns it, so calls
//! chain: `SessionConfig::default().with_request_timeout(t).with_exit_grace(g)`.

/// `setters!(Type { field: FieldType => with_field, … })` writes one
/// `pub fn with_field(self, field: FieldType) -> Type` per entry, documented
/// as setting that field.
macro_rules! setters {
    ($ty:ident { $($field:ident: $fty:ty => $setter:ident),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($field), "`](", stringify!($ty), "::", stringify!($field), ").")]
                #[must_use]
                pub fn $setter(mut self, $field: $fty) -> $ty {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}

pub(crate) use setters;
