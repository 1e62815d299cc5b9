//! Where log lines go: standard error, or, while a lab run lasts, a file in the run's directory.
//!
//! `iosets demo` and `iosets experiment` start servers and a FUSE mount in this process; their
//! log lines (a server's "serving", a mount's "mounted", fuser's warning on every clean unmount)
//! would fall between the command's own lines. A run points the log at its directory with
//! [`to_file`] and the lines come back to standard error when the guard drops.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};
use tracing_subscriber::fmt::MakeWriter;

/// The file log lines go to; `None`: standard error.
static FILE: Mutex<Option<File>> = Mutex::new(None);

/// The subscriber's writer: [`FILE`] if set, else standard error.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sink;

impl<'a> MakeWriter<'a> for Sink {
    type Writer = SinkWriter;

    fn make_writer(&'a self) -> SinkWriter {
        SinkWriter
    }
}

/// One event's writer (the subscriber formats an event, then writes it whole).
#[derive(Debug)]
pub struct SinkWriter;

impl Write for SinkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut file = FILE.lock().unwrap_or_else(|e| e.into_inner());
        match file.as_mut() {
            Some(f) => f.write(buf),
            None => io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut file = FILE.lock().unwrap_or_else(|e| e.into_inner());
        match file.as_mut() {
            Some(f) => f.flush(),
            None => io::stderr().flush(),
        }
    }
}

/// Log lines go to `path` (appended) until the guard drops.
pub(crate) fn to_file(path: &Path) -> Result<ToFile> {
    let f = File::options()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening the log file {}", path.display()))?;
    *FILE.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    Ok(ToFile)
}

/// Sends log lines back to standard error when dropped.
#[derive(Debug)]
#[must_use = "log lines go back to standard error when the guard drops"]
pub(crate) struct ToFile;

impl Drop for ToFile {
    fn drop(&mut self) {
        *FILE.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_go_to_the_file_while_the_guard_lives() {
        let dir = std::env::temp_dir().join(format!("iosets-logsink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.txt");
        {
            let _g = to_file(&path).unwrap();
            Sink.make_writer().write_all(b"one\n").unwrap();
        }
        // Back to standard error: nothing more reaches the file.
        Sink.make_writer()
            .write_all(b"logsink test: this line goes to stderr\n")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\n");
        assert!(to_file(&dir.join("no/such/dir/log.txt")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
