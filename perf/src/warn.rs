//! The library's warnings on standard error: ruCCL logs through `tracing` and installs no
//! subscriber, so without one a join or a collective that waits for a missing rank says
//! nothing until its timeout (10 minutes by default). This one prints the warnings and errors
//! it logs ("waiting for rank 1 ...") as `# ruccl WARN: ...` lines, and nothing else.

use std::fmt::{Debug, Write as _};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

/// Prints warnings and errors; every span and lesser event is off.
struct Warnings;

/// An event's message, then its other fields as `name=value`.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
}

/// One line for a warning or error event: `# ruccl WARN: message (fields)`.
fn line(level: &Level, l: &Line) -> String {
    let fields = if l.fields.is_empty() { String::new() } else { format!(" ({})", l.fields.trim_start()) };
    format!("# ruccl {level}: {}{fields}", l.message)
}

impl Subscriber for Warnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && *metadata.level() <= Level::WARN
    }

    // The global level filter: every `debug!`, `trace!` and `info!` (the library's per-op
    // spans and events) stops at one level comparison, as with no subscriber, instead of
    // asking its callsite. Timed calls must not pay for the printer.
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::WARN)
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if self.enabled(metadata) { Interest::always() } else { Interest::never() }
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut l = Line::default();
        event.record(&mut l);
        eprintln!("{}", line(event.metadata().level(), &l));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Installs the printer for the whole process (once; a second call changes nothing).
pub fn install() {
    let _ = tracing::subscriber::set_global_default(Warnings);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_one_comment_line() {
        let l = Line { message: "still waiting for rank 1".into(), fields: " rank=0 seq=3".into() };
        assert_eq!(line(&Level::WARN, &l), "# ruccl WARN: still waiting for rank 1 (rank=0 seq=3)");
        let bare = Line { message: "m".into(), fields: String::new() };
        assert_eq!(line(&Level::ERROR, &bare), "# ruccl ERROR: m");
    }
}
