//! What a rank of another process says of itself when a timeout report asks for it (a
//! flight-recorder answer over the connection, `FlightAnswer` frames): its last collective's
//! number, for blame, and its flight-recorder line, for the report. Encoded as text: the
//! number (or `-`), a newline, the line. Parsing never fails: bytes that do not follow the
//! form (another build's answer, garbage) are kept as the line, with no number.

use crate::types::Rank;

/// One rank of another process, as it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Heard {
    pub rank: Rank,
    /// The number of the last collective it issued, if it says.
    pub last_collective: Option<u64>,
    /// Its flight-recorder line ("in op #5 all_reduce(...) for 3.0s, waiting for ...").
    pub line: String,
}

/// The answer a rank whose last collective is `last` and whose line is `line` sends.
pub(crate) fn encode(last: Option<u64>, line: &str) -> Vec<u8> {
    let head = last.map_or_else(|| "-".to_string(), |l| l.to_string());
    format!("{head}\n{line}").into_bytes()
}

impl Heard {
    /// `rank`'s answer `bytes`.
    pub(crate) fn parse(rank: Rank, bytes: &[u8]) -> Heard {
        let text = String::from_utf8_lossy(bytes);
        // Control characters would break the report's lines (a peer's bytes are not trusted).
        let clean = |s: &str| s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>();
        match text.split_once('\n') {
            Some(("-", line)) => Heard { rank, last_collective: None, line: clean(line) },
            Some((n, line)) if n.parse::<u64>().is_ok() => {
                Heard { rank, last_collective: n.parse().ok(), line: clean(line) }
            }
            _ => Heard { rank, last_collective: None, line: clean(&text) },
        }
    }

    /// What `heard` says of `rank`, if it answered.
    pub(crate) fn of(heard: &[Heard], rank: Rank) -> Option<&Heard> {
        heard.iter().find(|h| h.rank == rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip_and_garbage_is_a_line() {
        let h = Heard::parse(3, &encode(Some(41), "in op #42 barrier for 1.0s"));
        assert_eq!(h, Heard { rank: 3, last_collective: Some(41), line: "in op #42 barrier for 1.0s".into() });
        let h = Heard::parse(1, &encode(None, "has not issued any operation"));
        assert_eq!((h.last_collective, h.line.as_str()), (None, "has not issued any operation"));
        // Another build's answer, garbage, control characters: a line, no number.
        for bytes in [&b"no newline"[..], b"12x\nline", b"\xff\xfe\n\x1b[2J", b""] {
            let h = Heard::parse(0, bytes);
            assert_eq!(h.last_collective, None, "{bytes:?}");
            assert!(!h.line.chars().any(char::is_control), "{bytes:?}");
        }
    }
}
