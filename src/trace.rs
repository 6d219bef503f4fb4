//! Tracing hooks that compile to nothing without the `tracing` feature.

#[cfg(feature = "tracing")]
macro_rules! debug_event { ($($t:tt)*) => { tracing::debug!($($t)*) } }
#[cfg(not(feature = "tracing"))]
macro_rules! debug_event {
    ($($t:tt)*) => {};
}

#[cfg(feature = "tracing")]
macro_rules! trace_event { ($($t:tt)*) => { tracing::trace!($($t)*) } }
#[cfg(not(feature = "tracing"))]
macro_rules! trace_event {
    ($($t:tt)*) => {};
}

pub(crate) use {debug_event, trace_event};
