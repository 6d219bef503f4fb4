//! Standard output, where the report goes. A reader that goes away early
//! (`ruccl-perf … | head`) ends the run quietly, as the `SIGPIPE` that stops nccl-tests
//! would, instead of `println!`'s panic ("failed printing to stdout: Broken pipe").

use std::io::{ErrorKind, Write};

/// Writes `text` and a newline to standard output (see the module docs for a closed pipe).
pub fn line(text: &str) {
    write(text, true);
}

/// Writes `text` to standard output as it is (see the module docs for a closed pipe).
pub fn text(text: &str) {
    write(text, false);
}

fn write(text: &str, newline: bool) {
    let mut out = std::io::stdout().lock();
    let written = out.write_all(text.as_bytes()).and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) });
    match written {
        Ok(()) => {}
        // Nobody reads the rest: stop here, as a C tool killed by `SIGPIPE` does, with
        // success (what was read was whole lines).
        Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("ruccl-perf: writing to standard output failed: {e}");
            std::process::exit(1);
        }
    }
}
