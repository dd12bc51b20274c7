//! docs/cli.md, the man pages (`docs/man/`) and the shell completions
//! (`completions/`), generated from the clap definitions so that none can
//! drift from the binary (a test compares the files with this output;
//! `STRATA_REGENERATE_DOCS=1 cargo test -p strata-cli --test docs` rewrites
//! them; `make install` installs them).
//!
//! Must not: document anything clap does not know, except the fixed
//! sections on output, exit codes and logging (`CONTRACT`), which state the
//! rules every command follows.

use std::fmt::Write;

use clap::CommandFactory;

/// The sections that hold for every command.
const CONTRACT: &str = r#"## Output, exit codes, logging

These rules hold for every command; CI jobs rely on them.

- **stdout carries results.** With `--json` (every command has it), stdout is
  exactly one JSON object on one line; without it, a short human summary.
  The objects of `compose`, `disk`, `build`, `inspect`, `push` and `demo`
  have `image` (a full `oci:DIR:TAG` or `docker://` reference), `digest`
  (`sha256:…`, the image manifest's), `version` and `ostree_commit`;
  `derive` has them per release in `releases` (and at the top too with one
  release manifest). `compose`, `derive` and `build` add `changed` (false
  when the inputs were unchanged and nothing was rebuilt). The shapes are in
  [formats.md](formats.md#command-output---json).
- **stderr carries logs** at `info` by default: `-v` shows debug (every
  external command line), `-vv` trace, `-q` only warnings and errors, `-qq`
  only errors (or `RUST_LOG`, when no flag is given). Messages of the C
  libraries strata loads (libdnf, librepo) are at debug unless they warn.
  `--log-format json` writes one JSON object per log line, for CI log
  collectors. Colours and the live region only when stderr is a terminal: a
  line per running stage, and a bar with bytes, percentage and time left per
  download, layer compression and disk hash or compression, the log printed
  above it; otherwise plain log lines, one event per line.
- **Exit codes** are stable:

  | code | meaning |
  |---|---|
  | 0 | success (also when nothing had to be rebuilt) |
  | 1 | the command failed; stderr ends with one line `error: <cause chain>` naming what failed and where (file:line:column for manifests, the command and its stderr for tools) |
  | 2 | usage error: unknown flag, missing argument, bad value (clap's message on stderr) |

- **No prompts**: nothing reads stdin; a held workdir lock is waited for
  (logged, naming the holder's pid and command line), never asked about.
  `strata build` holds the lock for its whole run, so a `strata prune` or
  another build started meanwhile waits until the run has ended.
"#;

/// The whole of docs/cli.md.
pub fn markdown() -> String {
    let mut cmd = crate::Cli::command();
    cmd.build();
    let mut out = String::new();
    out.push_str("# CLI reference\n\n");
    out.push_str(
        "<!-- Generated from the clap definitions in crates/cli by \
         `STRATA_REGENERATE_DOCS=1 cargo test -p strata-cli --test docs`; do not edit. -->\n\n",
    );
    let _ = writeln!(
        out,
        "{}\n",
        cmd.get_about().map(|a| a.to_string()).unwrap_or_default()
    );
    let _ = writeln!(out, "```\n{}\n```\n", usage(&mut cmd));
    let _ = writeln!(out, "| command | what it does |\n|---|---|");
    for sub in cmd.get_subcommands().filter(|s| documented(s)) {
        let _ = writeln!(
            out,
            "| [`strata {}`](#strata-{}) | {} |",
            sub.get_name(),
            sub.get_name(),
            sub.get_about().map(|a| a.to_string()).unwrap_or_default()
        );
    }
    out.push('\n');
    out.push_str(CONTRACT);
    for sub in &mut documented_subcommands(&cmd) {
        out.push('\n');
        command(&mut out, sub, "strata");
    }
    out
}

/// Hidden workers and clap's own `help` are not part of the interface.
fn documented(sub: &clap::Command) -> bool {
    !sub.is_hide_set() && sub.get_name() != "help"
}

fn documented_subcommands(cmd: &clap::Command) -> Vec<clap::Command> {
    cmd.get_subcommands()
        .filter(|s| documented(s))
        .cloned()
        .collect()
}

fn usage(cmd: &mut clap::Command) -> String {
    cmd.render_usage()
        .to_string()
        .trim_start_matches("Usage: ")
        .to_string()
}

/// One command's section, then one per subcommand (`strata node update`).
fn command(out: &mut String, cmd: &mut clap::Command, parent: &str) {
    let name = format!("{parent} {}", cmd.get_name());
    let _ = writeln!(out, "## {name}\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{about}\n");
    }
    let _ = writeln!(out, "```\n{}\n```\n", usage(cmd));
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .collect();
    if !args.is_empty() {
        let _ = writeln!(out, "| argument | meaning |\n|---|---|");
        for a in args {
            let _ = writeln!(out, "| {} | {} |", spelling(a), meaning(a));
        }
    }
    for sub in &mut documented_subcommands(cmd) {
        out.push('\n');
        command(out, sub, &name);
    }
}

/// `--var <KEY=VALUE>` / `<MANIFEST>...`.
fn spelling(a: &clap::Arg) -> String {
    let value = a
        .get_value_names()
        .map(|v| {
            v.iter()
                .map(|n| format!("<{n}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| format!("<{}>", a.get_id().as_str().to_uppercase()));
    let takes_value = a.get_action().takes_values();
    let s = match (a.get_long(), a.get_short()) {
        (Some(l), Some(c)) if takes_value => format!("`-{c}, --{l} {value}`"),
        (Some(l), Some(c)) => format!("`-{c}, --{l}`"),
        (Some(l), None) if takes_value => format!("`--{l} {value}`"),
        (Some(l), None) => format!("`--{l}`"),
        _ => {
            let many = matches!(a.get_num_args(), Some(r) if r.max_values() > 1);
            format!("`{value}{}`", if many { "..." } else { "" })
        }
    };
    let repeat = a.get_long().is_some() && matches!(a.get_action(), clap::ArgAction::Append);
    if repeat {
        format!("{s} (repeatable)")
    } else {
        s
    }
}

fn meaning(a: &clap::Arg) -> String {
    let mut m = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string().replace('\n', " "))
        .unwrap_or_default();
    if !m.is_empty() && !m.ends_with('.') {
        m.push('.');
    }
    if a.is_required_set() {
        m.push_str(" Required.");
    }
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && a.get_action().takes_values() {
        let _ = write!(m, " Default: `{}`.", defaults.join(","));
    }
    m.replace('|', "\\|")
}

/// One man page per command and subcommand (`strata.1`, `strata-compose.1`,
/// `strata-node-update.1`, …), hidden commands left out: file name and
/// roff text.
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    fn walk(cmd: &clap::Command, name: &str, out: &mut Vec<(String, Vec<u8>)>) {
        let cmd = cmd.clone().display_name(name.to_string());
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone())
            .render(&mut page)
            .expect("rendering into memory cannot fail");
        out.push((format!("{name}.1"), page));
        for sub in cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        {
            walk(sub, &format!("{name}-{}", sub.get_name()), out);
        }
    }
    let mut cmd = crate::Cli::command();
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, "strata", &mut out);
    out
}

/// Completions for bash, zsh and fish: file name (as each shell looks it
/// up) and script.
pub fn completions() -> Vec<(String, Vec<u8>)> {
    use clap_complete::Shell;
    [
        (Shell::Bash, "strata.bash"),
        (Shell::Zsh, "_strata"),
        (Shell::Fish, "strata.fish"),
    ]
    .into_iter()
    .map(|(shell, file)| {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut crate::Cli::command(), "strata", &mut script);
        (file.to_string(), script)
    })
    .collect()
}
