//! The CI job definitions in ci/ are well-formed YAML and every `strata`
//! command line in them is one the real CLI accepts (clap's own parser,
//! so a renamed or removed flag fails here, not in someone's pipeline).

use std::path::{Path, PathBuf};

use clap::Parser;
use serde_yaml::Value;

fn ci_files() -> Vec<PathBuf> {
    let ci = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci");
    let mut out = Vec::new();
    for sub in ["tekton", "prow"] {
        for e in std::fs::read_dir(ci.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every YAML document of a file.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

use serde::Deserialize;

/// `strata …` command lines in shell text: continuation lines joined, each
/// cut at the first shell operator or redirection.
fn command_lines(script: &str) -> Vec<Vec<String>> {
    let joined = script.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        if !line.split_whitespace().any(|w| w == "strata") {
            continue;
        }
        let words = shlex::split(line).unwrap_or_else(|| panic!("unbalanced quotes: {line}"));
        let Some(start) = words.iter().position(|w| w == "strata") else {
            continue;
        };
        let cmd: Vec<String> = words[start..]
            .iter()
            .take_while(|w| !matches!(w.as_str(), "|" | ">" | ">>" | "&&" | "||" | ";" | "2>"))
            .cloned()
            .collect();
        out.push(cmd);
    }
    out
}

/// Every strata command in a YAML value: in strings (scripts) and in
/// `command: [strata, …]` + `args: […]` lists.
fn collect(v: &Value, out: &mut Vec<Vec<String>>) {
    match v {
        Value::String(s) => out.extend(command_lines(s)),
        Value::Sequence(items) => items.iter().for_each(|i| collect(i, out)),
        Value::Mapping(m) => {
            let strs = |key: &str| -> Option<Vec<String>> {
                m.get(key)?
                    .as_sequence()?
                    .iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect()
            };
            if let Some(command) =
                strs("command").filter(|c| c.first().is_some_and(|c| c == "strata"))
            {
                let mut argv = command;
                argv.extend(strs("args").unwrap_or_default());
                out.push(argv);
            }
            m.values().for_each(|x| collect(x, out));
        }
        _ => {}
    }
}

#[test]
fn ci_jobs_use_only_real_strata_flags() {
    let files = ci_files();
    assert!(files.len() >= 2, "{files:?}");
    for f in &files {
        let mut cmds = Vec::new();
        for doc in documents(f) {
            collect(&doc, &mut cmds);
        }
        assert!(!cmds.is_empty(), "{}: no strata command", f.display());
        for argv in &cmds {
            if let Err(e) = strata_cli::Cli::try_parse_from(argv) {
                panic!("{}: `{}` does not parse:\n{e}", f.display(), argv.join(" "));
            }
        }
    }
}

#[test]
fn tekton_pipeline_has_one_derive_task_per_release() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci/tekton/rhcos-pipeline.yaml");
    let docs = documents(&path);
    let pipeline = docs
        .iter()
        .find(|d| d["kind"] == "Pipeline")
        .expect("a Pipeline");
    let tasks = pipeline["spec"]["tasks"].as_sequence().unwrap();
    let mut releases: Vec<&str> = tasks
        .iter()
        .filter(|t| t["taskRef"]["name"] == "strata-derive")
        .map(|t| {
            t["params"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "release")
                .and_then(|p| p["value"].as_str())
                .unwrap()
        })
        .collect();
    releases.sort();
    // The RHEL 9.6 line of manifests/pipeline.yaml; each release's manifest
    // exists.
    assert_eq!(releases, ["4.19", "4.20"]);
    for r in &releases {
        let manifest =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../manifests/ocp-{r}.yaml"));
        assert!(manifest.is_file(), "{}", manifest.display());
    }
    // Every referenced task is defined in the file.
    for t in tasks {
        let name = t["taskRef"]["name"].as_str().unwrap();
        assert!(
            docs.iter()
                .any(|d| d["kind"] == "Task" && d["metadata"]["name"] == name),
            "task {name} is not defined"
        );
    }
}

#[test]
fn command_lines_are_found_in_scripts() {
    let cmds = command_lines(
        "set -e\nstrata derive --base x \\\n  a.yaml --json > out.json\necho strata-like\n",
    );
    assert_eq!(
        cmds,
        [["strata", "derive", "--base", "x", "a.yaml", "--json"]]
    );
}
