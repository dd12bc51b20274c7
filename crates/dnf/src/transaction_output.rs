//! What an rpm transaction says: its output (rpm's messages, what
//! scriptlets print) held while it runs so that an error can quote its
//! end, a failed scriptlet named by package and scriptlet, and a full
//! filesystem named as such (rpm's own message does not say).

use std::fs;
use std::path::Path;

use crate::error::Error;

/// rpm's `%post(NEVRA) scriptlet failed, exit status N`, in its parts:
/// scriptlet, package NEVRA, status.
pub(crate) fn parse_scriptlet_failure(message: &str) -> (&str, &str, &str) {
    let (head, status) = message
        .split_once(" scriptlet failed, ")
        .unwrap_or((message, "failed"));
    match head.split_once('(') {
        Some((scriptlet, rest)) => (scriptlet, rest.trim_end_matches(')'), status),
        None => (head, "?", status),
    }
}

/// rpm's failure message as an error, with the output's tail.
pub(crate) fn scriptlet_failed(message: &str, output: &str) -> Error {
    let (scriptlet, package, status) = parse_scriptlet_failure(message);
    Error::ScriptletFailed {
        package: package.to_string(),
        scriptlet: scriptlet.to_string(),
        status: status.to_string(),
        output: output.to_string(),
    }
}

/// How much of the transaction's output an error quotes.
const OUTPUT_LINES: usize = 4;
/// Bytes, cut at a character boundary.
const OUTPUT_CHARS: usize = 400;

/// The transaction's own output (rpm's messages, what scriptlets print),
/// held while rpm runs so that a failure can quote its end, then passed on
/// to stderr whole. Standard output and error are the process's, so this
/// redirects the file descriptors themselves.
pub(crate) struct OutputCapture {
    file: fs::File,
    stdout: std::os::fd::OwnedFd,
    stderr: std::os::fd::OwnedFd,
}

impl OutputCapture {
    pub(crate) fn start() -> Option<OutputCapture> {
        use std::io::Write;
        let file = tempfile::tempfile().ok()?;
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        let stdout = rustix::io::dup(std::io::stdout()).ok()?;
        let stderr = rustix::io::dup(std::io::stderr()).ok()?;
        rustix::stdio::dup2_stdout(&file).ok()?;
        if rustix::stdio::dup2_stderr(&file).is_err() {
            let _ = rustix::stdio::dup2_stdout(&stdout);
            return None;
        }
        Some(OutputCapture {
            file,
            stdout,
            stderr,
        })
    }

    /// Restores the descriptors, writes what was held to stderr and returns
    /// its last lines, joined on one line.
    pub(crate) fn finish(mut self) -> String {
        use std::io::{Read, Seek, Write};
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        let _ = rustix::stdio::dup2_stdout(&self.stdout);
        let _ = rustix::stdio::dup2_stderr(&self.stderr);
        let mut held = Vec::new();
        let _ = self.file.seek(std::io::SeekFrom::Start(0));
        let _ = self.file.read_to_end(&mut held);
        let _ = std::io::stderr().write_all(&held);
        let text = String::from_utf8_lossy(&held);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            // rpm's own line about the failure becomes the error itself.
            .filter(|l| !l.is_empty() && !l.contains(" scriptlet failed, "))
            .collect();
        let joined = lines[lines.len().saturating_sub(OUTPUT_LINES)..].join(" | ");
        strata_process::worker::tail(&joined, OUTPUT_CHARS)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }
}

/// A failed transaction on a filesystem with less than 4 MiB free (or no
/// free inode) is reported as what it is: rpm's own message does not say.
pub(crate) fn explain_full(root: &Path, e: Error) -> Error {
    let Ok(st) = rustix::fs::statvfs(root) else {
        return e;
    };
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    let no_inodes = st.f_files > 0 && st.f_favail == 0;
    if free >= 4 << 20 && !no_inodes {
        return e;
    }
    Error::NoSpace {
        root: root.to_path_buf(),
        free_kib: free / 1024,
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_workdir::record::nevra_name;

    #[test]
    fn quoted_output_is_cut_at_a_character_boundary() {
        use strata_process::worker::tail;
        assert_eq!(tail("abc", 10), "abc");
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("aé", 1), "");
        assert_eq!(tail("aéb", 2), "b");
    }

    #[test]
    fn rpms_scriptlet_failure_message_is_read_into_its_parts() {
        let m = "%post(failing-post-1:1.0-1.el8.x86_64) scriptlet failed, exit status 3";
        let (scriptlet, package, status) = parse_scriptlet_failure(m);
        assert_eq!(
            (scriptlet, package, status),
            ("%post", "failing-post-1:1.0-1.el8.x86_64", "exit status 3")
        );
        assert_eq!(nevra_name(package), "failing-post");
        let e = scriptlet_failed(m, "cannot reach it").to_string();
        assert_eq!(
            e,
            "package failing-post-1:1.0-1.el8.x86_64: its %post scriptlet failed (exit status 3); output ends: cannot reach it"
        );
    }
}
