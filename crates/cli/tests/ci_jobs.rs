//! The CI definitions in ci/ are ones that would run as written: every
//! `strata` command line in them is one the real CLI accepts (clap's own
//! parser, so a renamed or removed flag fails here, not in someone's
//! pipeline), and the Tekton and ci-operator files are consistent with
//! themselves and with the repository (docs/ci.md).
//!
//! Tekton (ci/tekton/): every param, workspace and result a task or the
//! pipeline refers to is declared and bound; results carry the names Tekton
//! Chains reads; step images come from parameters that name a digest;
//! every step states its securityContext and resources, and the SCC admits
//! them. ci-operator (ci/openshift-ci/): the keys ci-operator requires, the
//! images each step runs in, the variables its commands read, and the
//! override against the release manifest. Parsing only: no cluster, no
//! network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::Parser;
use serde::Deserialize;
use serde_yaml::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every YAML file under ci/.
fn ci_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo().join("ci"), &mut out);
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

fn tekton_documents() -> Vec<Value> {
    ci_files()
        .iter()
        .filter(|p| p.starts_with(repo().join("ci/tekton")))
        .flat_map(|p| documents(p))
        .collect()
}

/// The ci-operator configurations: ci/openshift-ci/ci-operator/config/….
fn ci_operator_configs() -> Vec<(PathBuf, Value)> {
    let dir = repo().join("ci/openshift-ci/ci-operator/config");
    let configs: Vec<_> = ci_files()
        .into_iter()
        .filter(|p| p.starts_with(&dir))
        .map(|p| {
            let mut docs = documents(&p);
            assert_eq!(docs.len(), 1, "{}: one document", p.display());
            (p, docs.remove(0))
        })
        .collect();
    assert!(!configs.is_empty(), "no ci-operator configuration");
    configs
}

/// `strata …` command lines in shell text: continuation lines joined,
/// comments skipped, each cut at the first shell operator or redirection.
fn command_lines(script: &str) -> Vec<Vec<String>> {
    let joined = script.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        if line.trim_start().starts_with('#') || !line.split_whitespace().any(|w| w == "strata") {
            continue;
        }
        let words = shlex::split(line).unwrap_or_else(|| panic!("unbalanced quotes: {line}"));
        // strata in command position: first, or after an operator.
        let Some(start) = words.iter().enumerate().position(|(i, w)| {
            w == "strata"
                && (i == 0
                    || matches!(
                        words[i - 1].as_str(),
                        "|" | "&&" | "||" | ";" | "!" | "then" | "do" | "else" | "exec"
                    ))
        }) else {
            continue;
        };
        let cmd: Vec<String> = words[start..]
            .iter()
            .take_while(|w| !matches!(w.as_str(), "|" | ">" | ">>" | "&&" | "||" | ";" | "2>"))
            .cloned()
            .collect();
        // A lone word is a name (an image called strata), not a command.
        if cmd.len() > 1 {
            out.push(cmd);
        }
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

/// Every string in a YAML value.
fn strings(v: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    fn go<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Sequence(items) => items.iter().for_each(|i| go(i, out)),
            Value::Mapping(m) => m.values().for_each(|x| go(x, out)),
            _ => {}
        }
    }
    go(v, &mut out);
    out
}

/// Tekton variable references, `$(…)`, in a string.
fn tekton_refs(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("$(") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        let inner = &after[..end];
        // `$(cat file)` and other shell command substitutions are not
        // Tekton's: its variables are dotted paths without spaces.
        if !inner.contains(' ') && inner.contains('.') {
            out.push(inner);
        }
        rest = &after[end..];
    }
    out
}

fn names(list: &Value) -> Vec<&str> {
    list.as_sequence()
        .map(|s| s.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default()
}

fn str_list(v: &Value) -> Vec<&str> {
    v.as_sequence()
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn ci_jobs_use_only_real_strata_flags() {
    let files = ci_files();
    let mut total = 0;
    for f in &files {
        let mut cmds = Vec::new();
        for doc in documents(f) {
            collect(&doc, &mut cmds);
        }
        for argv in &cmds {
            if let Err(e) = strata_cli::Cli::try_parse_from(argv) {
                panic!("{}: `{}` does not parse:\n{e}", f.display(), argv.join(" "));
            }
            // Disks built in CI are published: they name the image nodes
            // upgrade from, not a path on the build machine.
            if argv.get(1).is_some_and(|c| c == "disk") {
                assert!(
                    argv.iter().any(|a| a == "--target-image"),
                    "{}: `{}` lacks --target-image",
                    f.display(),
                    argv.join(" ")
                );
            }
        }
        total += cmds.len();
    }
    assert!(total >= 6, "only {total} strata commands under ci/");
    for job in [
        "ci/tekton/rhcos-pipeline.yaml",
        "ci/openshift-ci/ci-operator/config/openshift/kubernetes/openshift-kubernetes-release-4.19__rhcos-strata.yaml",
    ] {
        let mut cmds = Vec::new();
        documents(&repo().join(job))
            .iter()
            .for_each(|d| collect(d, &mut cmds));
        assert!(!cmds.is_empty(), "{job}: no strata command");
    }
}

#[test]
fn ci_images_are_pinned_not_latest() {
    for f in ci_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains(":latest"),
            "{}: names a :latest image",
            f.display()
        );
        for doc in documents(&f) {
            if doc["kind"] != "Task" {
                continue;
            }
            for step in doc["spec"]["steps"].as_sequence().unwrap() {
                let image = step["image"].as_str().unwrap();
                assert!(
                    image.starts_with("$(params.") && image.ends_with("-image)"),
                    "{}: step {:?} runs {image}, not an image parameter",
                    f.display(),
                    step["name"]
                );
            }
        }
    }
}

/// A task the pipeline takes from the cluster: its interface as the
/// provider documents it.
struct ExternalTask {
    params: &'static [&'static str],
    required_params: &'static [&'static str],
    workspaces: &'static [&'static str],
    required_workspaces: &'static [&'static str],
    results: &'static [&'static str],
}

/// OpenShift Pipelines' git-clone task (namespace openshift-pipelines,
/// cluster resolver).
const GIT_CLONE: ExternalTask = ExternalTask {
    params: &[
        "URL",
        "REVISION",
        "REFSPEC",
        "SUBMODULES",
        "DEPTH",
        "SSL_VERIFY",
        "CRT_FILENAME",
        "SUBDIRECTORY",
        "SPARSE_CHECKOUT_DIRECTORIES",
        "DELETE_EXISTING",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "VERBOSE",
        "USER_HOME",
    ],
    required_params: &["URL"],
    workspaces: &["output", "ssh-directory", "basic-auth", "ssl-ca-directory"],
    required_workspaces: &["output"],
    results: &["COMMIT", "URL", "COMMITTER_DATE"],
};

/// What a pipeline task runs: a Task in ci/tekton/ or an external one.
enum TaskDef<'a> {
    Local(&'a Value),
    External(&'static ExternalTask),
}

impl TaskDef<'_> {
    fn params(&self) -> Vec<(String, bool)> {
        match self {
            TaskDef::Local(t) => t["spec"]["params"]
                .as_sequence()
                .into_iter()
                .flatten()
                .map(|p| {
                    let name = p["name"].as_str().unwrap().to_string();
                    let required = p.get("default").is_none();
                    (name, required)
                })
                .collect(),
            TaskDef::External(e) => e
                .params
                .iter()
                .map(|p| (p.to_string(), e.required_params.contains(p)))
                .collect(),
        }
    }
    fn workspaces(&self) -> Vec<(String, bool)> {
        match self {
            TaskDef::Local(t) => t["spec"]["workspaces"]
                .as_sequence()
                .into_iter()
                .flatten()
                .map(|w| {
                    let name = w["name"].as_str().unwrap().to_string();
                    (name, w["optional"].as_bool() != Some(true))
                })
                .collect(),
            TaskDef::External(e) => e
                .workspaces
                .iter()
                .map(|w| (w.to_string(), e.required_workspaces.contains(w)))
                .collect(),
        }
    }
    fn results(&self) -> Vec<String> {
        match self {
            TaskDef::Local(t) => names(&t["spec"]["results"])
                .into_iter()
                .map(str::to_string)
                .collect(),
            TaskDef::External(e) => e.results.iter().map(|r| r.to_string()).collect(),
        }
    }
}

fn task_def<'a>(docs: &'a [Value], pipeline_task: &Value) -> TaskDef<'a> {
    let r = &pipeline_task["taskRef"];
    if let Some(name) = r["name"].as_str() {
        let t = docs
            .iter()
            .find(|d| d["kind"] == "Task" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("task {name} is not defined in ci/tekton/"));
        return TaskDef::Local(t);
    }
    let resolver_param = |n: &str| {
        r["params"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == n)
            .and_then(|p| p["value"].as_str())
    };
    match (
        r["resolver"].as_str(),
        resolver_param("kind"),
        resolver_param("name"),
        resolver_param("namespace"),
    ) {
        (Some("cluster"), Some("task"), Some("git-clone"), Some("openshift-pipelines")) => {
            TaskDef::External(&GIT_CLONE)
        }
        other => panic!("unknown task reference {other:?}"),
    }
}

/// Chains reads `*IMAGE_URL`/`*IMAGE_DIGEST` pairs (and `IMAGES`,
/// `*ARTIFACT_URI`/`*ARTIFACT_DIGEST`, `*ARTIFACT_OUTPUTS`) as what a run
/// built, `CHAINS-GIT_URL`/`CHAINS-GIT_COMMIT` as what it read.
fn assert_chains_pairs(what: &str, results: &[&str]) {
    for (a, b) in [
        ("IMAGE_URL", "IMAGE_DIGEST"),
        ("ARTIFACT_URI", "ARTIFACT_DIGEST"),
    ] {
        for r in results {
            for (x, y) in [(a, b), (b, a)] {
                if let Some(prefix) = r.strip_suffix(x) {
                    let pair = format!("{prefix}{y}");
                    assert!(
                        results.contains(&pair.as_str()),
                        "{what}: {r} without {pair}"
                    );
                }
            }
        }
    }
    let git = ["CHAINS-GIT_URL", "CHAINS-GIT_COMMIT"];
    assert_eq!(
        git.iter().filter(|g| results.contains(g)).count() % 2,
        0,
        "{what}: CHAINS-GIT_URL and CHAINS-GIT_COMMIT go together"
    );
}

#[test]
fn tekton_tasks_declare_what_they_use() {
    let docs = tekton_documents();
    let sccs: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "SecurityContextConstraints")
        .collect();
    assert_eq!(sccs.len(), 1, "one SCC in ci/tekton/");
    let scc = sccs[0];
    let tasks: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Task").collect();
    assert!(tasks.len() >= 3);
    for task in tasks {
        let name = task["metadata"]["name"].as_str().unwrap();
        let spec = &task["spec"];
        let def = TaskDef::Local(task);
        let params: BTreeMap<String, bool> = def.params().into_iter().collect();
        let workspaces: BTreeSet<String> = def.workspaces().into_iter().map(|w| w.0).collect();
        let results = def.results();
        let volumes = names(&spec["volumes"]);

        // Every variable a step uses is declared; every result is written.
        let mut written = BTreeSet::new();
        for s in strings(&spec["steps"])
            .into_iter()
            .chain(strings(&spec["stepTemplate"]))
        {
            for r in tekton_refs(s) {
                let parts: Vec<&str> = r.split('.').collect();
                match parts.as_slice() {
                    ["params", p] => assert!(params.contains_key(*p), "{name}: $({r}) undeclared"),
                    ["workspaces", w, "path" | "bound" | "claim" | "volume"] => {
                        assert!(workspaces.contains(*w), "{name}: $({r}) undeclared")
                    }
                    ["results", res, "path"] => {
                        assert!(
                            results.iter().any(|x| x == res),
                            "{name}: $({r}) undeclared"
                        );
                        written.insert(res.to_string());
                    }
                    ["context", "taskRun" | "task", _] => {}
                    _ => panic!("{name}: unknown variable $({r})"),
                }
            }
        }
        for r in &results {
            assert!(written.contains(r), "{name}: result {r} is never written");
        }
        let result_names: Vec<&str> = results.iter().map(String::as_str).collect();
        assert_chains_pairs(name, &result_names);
        // A task that pushes says what it pushed, as Chains reads it.
        let pushes = strings(&spec["steps"])
            .iter()
            .any(|s| s.contains("--push") || s.contains("oras push"));
        if pushes {
            assert!(
                result_names.contains(&"IMAGE_URL") && result_names.contains(&"IMAGE_DIGEST"),
                "{name}: pushes without IMAGE_URL/IMAGE_DIGEST results"
            );
        }

        for step in spec["steps"].as_sequence().unwrap() {
            let step_name = format!("{name}/{}", step["name"].as_str().unwrap());
            // Images come from parameters the run must give.
            let image = step["image"].as_str().unwrap();
            let p = image
                .strip_prefix("$(params.")
                .and_then(|p| p.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{step_name}: image {image} is not a parameter"));
            assert_eq!(
                params.get(p),
                Some(&true),
                "{step_name}: {p} must be a parameter without default (a digest the run gives)"
            );
            for m in step["volumeMounts"].as_sequence().into_iter().flatten() {
                let v = m["name"].as_str().unwrap();
                assert!(volumes.contains(&v), "{step_name}: volume {v} undeclared");
            }
            // Resources and securityContext: the step's, else the template's.
            let res = step
                .get("computeResources")
                .or_else(|| spec["stepTemplate"].get("computeResources"))
                .unwrap_or_else(|| panic!("{step_name}: no computeResources"));
            for (kind, key) in [
                ("requests", "cpu"),
                ("requests", "memory"),
                ("limits", "memory"),
            ] {
                assert!(res[kind].get(key).is_some(), "{step_name}: no {kind}.{key}");
            }
            let sc = step
                .get("securityContext")
                .or_else(|| spec["stepTemplate"].get("securityContext"))
                .unwrap_or_else(|| panic!("{step_name}: no securityContext"));
            assert_ne!(
                sc["privileged"].as_bool(),
                Some(true),
                "{step_name}: privileged"
            );
            assert_eq!(
                str_list(&sc["capabilities"]["drop"]),
                ["ALL"],
                "{step_name}: drops every capability it does not add"
            );
            assert!(sc.get("runAsUser").is_some(), "{step_name}: no runAsUser");
            assert!(
                sc.get("seccompProfile").is_some(),
                "{step_name}: no seccompProfile"
            );
            // The SCC admits it.
            let allowed = str_list(&scc["allowedCapabilities"]);
            for cap in str_list(&sc["capabilities"]["add"]) {
                assert!(
                    allowed.contains(&cap),
                    "{step_name}: SCC does not allow {cap}"
                );
            }
            let seccomp = match sc["seccompProfile"]["type"].as_str().unwrap() {
                "Unconfined" => "unconfined",
                "RuntimeDefault" => "runtime/default",
                other => panic!("{step_name}: seccomp profile {other}"),
            };
            assert!(
                str_list(&scc["seccompProfiles"]).contains(&seccomp),
                "{step_name}: SCC does not allow seccomp {seccomp}"
            );
            if let Some(t) = sc["seLinuxOptions"]["type"].as_str() {
                assert_eq!(
                    scc["seLinuxContext"]["seLinuxOptions"]["type"].as_str(),
                    Some(t),
                    "{step_name}: SCC does not give SELinux type {t}"
                );
            }
        }
    }
    // User namespaces: the SCC admits only pods with their own, which the
    // pod template asks for; nothing privileged.
    assert_eq!(scc["userNamespaceLevel"], "RequirePodLevel");
    assert_eq!(scc["allowPrivilegedContainer"], false);
    assert_eq!(scc["allowHostDirVolumePlugin"], false);
    let template = documents(&repo().join("ci/tekton/pod-template.yaml"));
    assert_eq!(template[0]["hostUsers"], false);
    // The service account may use the SCC.
    let binding = docs
        .iter()
        .find(|d| d["kind"] == "RoleBinding")
        .expect("a RoleBinding");
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == binding["roleRef"]["name"])
        .expect("the bound ClusterRole");
    assert_eq!(
        str_list(&role["rules"][0]["resourceNames"]),
        [scc["metadata"]["name"].as_str().unwrap()]
    );
    assert_eq!(str_list(&role["rules"][0]["verbs"]), ["use"]);
    let sa = &binding["subjects"][0];
    assert!(docs.iter().any(|d| d["kind"] == "ServiceAccount"
        && d["metadata"]["name"] == sa["name"]
        && d["metadata"]["namespace"] == sa["namespace"]));
}

#[test]
fn tekton_pipeline_binds_every_param_workspace_and_result() {
    let docs = tekton_documents();
    let pipeline = docs
        .iter()
        .find(|d| d["kind"] == "Pipeline")
        .expect("a Pipeline");
    let spec = &pipeline["spec"];
    let params: BTreeMap<&str, &Value> = spec["params"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p))
        .collect();
    let workspaces = names(&spec["workspaces"]);
    let tasks: Vec<&Value> = spec["tasks"]
        .as_sequence()
        .unwrap()
        .iter()
        .chain(spec["finally"].as_sequence().into_iter().flatten())
        .collect();
    let task_names: Vec<&str> = tasks.iter().map(|t| t["name"].as_str().unwrap()).collect();

    // Image parameters name digests the run gives: no default.
    for (name, p) in &params {
        if name.ends_with("-image") {
            assert!(
                p.get("default").is_none(),
                "{name}: an image parameter has no default"
            );
        }
    }
    let check_ref = |r: &str, whose: &str| {
        let parts: Vec<&str> = r.split('.').collect();
        match parts.as_slice() {
            ["params", p] => assert!(params.contains_key(p), "{whose}: $({r}) undeclared"),
            ["tasks", t, "results", res] => {
                let pt = tasks
                    .iter()
                    .find(|x| x["name"] == *t)
                    .unwrap_or_else(|| panic!("{whose}: $({r}): no task {t}"));
                let def = task_def(&docs, pt);
                assert!(
                    def.results().iter().any(|x| x == res),
                    "{whose}: $({r}): {t} has no result {res}"
                );
            }
            ["context", "pipelineRun", "name" | "namespace" | "uid"] => {}
            ["context", "pipeline", "name"] => {}
            _ => panic!("{whose}: unknown variable $({r})"),
        }
    };
    let mut used_workspaces = BTreeSet::new();
    for pt in &tasks {
        let tname = pt["name"].as_str().unwrap();
        let def = task_def(&docs, pt);
        for after in str_list(&pt["runAfter"]) {
            assert!(task_names.contains(&after), "{tname}: runAfter {after}");
        }
        // Params: declared by the task, every required one given, every
        // variable in a value resolvable.
        let declared = def.params();
        let given = names(&pt["params"]);
        for g in &given {
            assert!(
                declared.iter().any(|(d, _)| d == g),
                "{tname}: the task has no param {g}"
            );
        }
        for (d, required) in &declared {
            assert!(
                !required || given.contains(&d.as_str()),
                "{tname}: param {d} not given"
            );
        }
        for s in strings(&pt["params"]) {
            tekton_refs(s).into_iter().for_each(|r| check_ref(r, tname));
        }
        // Workspaces: every one the task needs is bound to one the
        // pipeline declares.
        let bound = pt["workspaces"].as_sequence().cloned().unwrap_or_default();
        for b in &bound {
            let n = b["name"].as_str().unwrap();
            let w = b["workspace"].as_str().unwrap();
            assert!(
                def.workspaces().iter().any(|(d, _)| d == n),
                "{tname}: the task has no workspace {n}"
            );
            assert!(
                workspaces.contains(&w),
                "{tname}: pipeline has no workspace {w}"
            );
            used_workspaces.insert(w.to_string());
        }
        for (d, required) in def.workspaces() {
            assert!(
                !required || bound.iter().any(|b| b["name"] == d.as_str()),
                "{tname}: workspace {d} not bound"
            );
        }
    }
    for w in &workspaces {
        assert!(
            used_workspaces.contains(*w),
            "workspace {w} is bound to no task"
        );
    }
    // Results: resolvable, and named as Chains reads them, for the base,
    // every node image and its boot images, and the manifests' commit.
    let results = names(&spec["results"]);
    for r in spec["results"].as_sequence().unwrap() {
        for s in strings(&r["value"]) {
            tekton_refs(s)
                .into_iter()
                .for_each(|x| check_ref(x, "results"));
        }
    }
    assert_chains_pairs("pipeline", &results);
    for r in [
        "CHAINS-GIT_URL",
        "CHAINS-GIT_COMMIT",
        "base-IMAGE_DIGEST",
        "ocp-4-19-IMAGE_DIGEST",
        "ocp-4-20-IMAGE_DIGEST",
        "ocp-4-19-bootimages-IMAGE_DIGEST",
        "ocp-4-20-bootimages-IMAGE_DIGEST",
    ] {
        assert!(results.contains(&r), "pipeline result {r} missing");
    }
}

#[test]
fn tekton_pipeline_has_one_derive_task_per_release() {
    let docs = tekton_documents();
    let pipeline = docs
        .iter()
        .find(|d| d["kind"] == "Pipeline")
        .expect("a Pipeline");
    let tasks = pipeline["spec"]["tasks"].as_sequence().unwrap();
    let release_of = |t: &Value| -> String {
        t["params"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "release")
            .and_then(|p| p["value"].as_str())
            .unwrap()
            .to_string()
    };
    let mut releases: Vec<String> = tasks
        .iter()
        .filter(|t| t["taskRef"]["name"] == "strata-derive")
        .map(release_of)
        .collect();
    releases.sort();
    // The RHEL 9.6 line of manifests/pipeline.yaml; each release's manifest
    // exists, and each release gets its boot images.
    assert_eq!(releases, ["4.19", "4.20"]);
    for r in &releases {
        assert!(repo().join(format!("manifests/ocp-{r}.yaml")).is_file());
        assert!(
            tasks
                .iter()
                .any(|t| t["taskRef"]["name"] == "strata-disk" && release_of(t) == *r),
            "no disk task for {r}"
        );
    }
    let compose = tasks
        .iter()
        .find(|t| t["taskRef"]["name"] == "strata-compose")
        .unwrap();
    let manifest = compose["params"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "manifest")
        .and_then(|p| p["value"].as_str())
        .unwrap();
    assert!(repo().join(manifest).is_file(), "{manifest}");
}

/// Variables ci-operator gives every step (and Prow's).
const CI_OPERATOR_ENV: &[&str] = &[
    "SHARED_DIR",
    "ARTIFACT_DIR",
    "NAMESPACE",
    "JOB_NAME",
    "JOB_NAME_SAFE",
    "JOB_NAME_HASH",
    "JOB_SPEC",
    "JOB_TYPE",
    "BUILD_ID",
    "PROW_JOB_ID",
    "PULL_BASE_REF",
    "PULL_BASE_SHA",
    "REPO_OWNER",
    "REPO_NAME",
    "KUBECONFIG",
];

/// Step parameters only the one adding the configuration to
/// openshift/release can give (docs/ci.md, "OpenShift CI").
const DEPLOYMENT_INPUTS: &[&str] = &["STRATA_GIT_URL"];

/// Upper-case shell variables a script reads (`$X`, `${X}`, `${X:-…}`);
/// lower-case ones are the script's own.
fn shell_vars(script: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = script.as_bytes();
    for (i, _) in script.match_indices('$') {
        let start = if b.get(i + 1) == Some(&b'{') {
            i + 2
        } else {
            i + 1
        };
        let name: String = script[start..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if name.len() > 1 && !name.starts_with(|c: char| c.is_ascii_digit()) {
            out.insert(name);
        }
    }
    out
}

/// The packages a release manifest installs (its own `packages:` lines).
fn manifest_packages(path: &Path) -> BTreeSet<String> {
    let doc = &documents(path)[0];
    strings(&doc["packages"])
        .iter()
        .flat_map(|l| l.split_whitespace())
        .map(str::to_string)
        .collect()
}

#[test]
fn ci_operator_configs_have_what_ci_operator_requires() {
    for (path, c) in ci_operator_configs() {
        let f = path.display().to_string();
        // Where openshift/release keeps it: ci-operator/config/ORG/REPO/
        // ORG-REPO-BRANCH[__VARIANT].yaml, named by its metadata.
        let meta = &c["zz_generated_metadata"];
        let (org, repo_name, branch) = (
            meta["org"].as_str().unwrap(),
            meta["repo"].as_str().unwrap(),
            meta["branch"].as_str().unwrap(),
        );
        let mut file = format!("{org}-{repo_name}-{branch}");
        if let Some(v) = meta["variant"].as_str() {
            file = format!("{file}__{v}");
        }
        assert!(
            path.ends_with(format!("config/{org}/{repo_name}/{file}.yaml")),
            "{f}: not where its metadata puts it"
        );
        // build_root, resources for every step ('*'), tests.
        let br = &c["build_root"];
        assert!(
            br["from_repository"] == true
                || br.get("image_stream_tag").is_some()
                || br.get("project_image").is_some(),
            "{f}: build_root"
        );
        for k in ["cpu", "memory"] {
            assert!(
                c["resources"]["*"]["requests"].get(k).is_some(),
                "{f}: resources '*'"
            );
        }
        // The images a step may run in.
        let mut images: BTreeSet<String> = ["src", "root"].map(String::from).into();
        if c.get("binary_build_commands").is_some() {
            images.insert("bin".into());
        }
        if c.get("rpm_build_commands").is_some() {
            images.insert("rpms".into());
        }
        if let Some(m) = c["base_images"].as_mapping() {
            for (k, v) in m {
                images.insert(k.as_str().unwrap().into());
                for key in ["namespace", "name", "tag"] {
                    assert!(v.get(key).is_some(), "{f}: base image {k:?} lacks {key}");
                }
            }
        }
        for img in c["images"].as_sequence().into_iter().flatten() {
            let to = img["to"].as_str().unwrap();
            if let Some(from) = img["from"].as_str() {
                assert!(images.contains(from), "{f}: image {to} from unknown {from}");
            }
            for (input, _) in img["inputs"].as_mapping().into_iter().flatten() {
                let input = input.as_str().unwrap();
                assert!(
                    images.contains(input),
                    "{f}: image {to} reads unknown {input}"
                );
            }
            images.insert(to.into());
        }
        // The RPMs come from the repository's own build, where it writes
        // them.
        if c.get("rpm_build_commands").is_some() {
            assert_eq!(c["rpm_build_commands"], "openshift-hack/build-rpms.sh");
            let go = c["canonical_go_repository"].as_str().unwrap();
            let want = format!("/go/src/{go}/_output/local/releases/rpms/");
            let read: Vec<&str> = c["images"]
                .as_sequence()
                .into_iter()
                .flatten()
                .flat_map(|i| {
                    i["inputs"]["rpms"]["paths"]
                        .as_sequence()
                        .into_iter()
                        .flatten()
                })
                .filter_map(|p| p["source_path"].as_str())
                .collect();
            assert!(!read.is_empty(), "{f}: no image reads the RPMs");
            for r in read {
                assert!(
                    r.starts_with(&want),
                    "{f}: RPMs read from {r}, written to {want}"
                );
            }
        }

        let tests = c["tests"].as_sequence().unwrap();
        assert!(!tests.is_empty(), "{f}: no tests");
        let mut seen = BTreeSet::new();
        for t in tests {
            let name = t["as"].as_str().unwrap();
            assert!(seen.insert(name), "{f}: test {name} twice");
            let is_container = t.get("commands").is_some();
            assert_ne!(
                is_container,
                t.get("steps").is_some(),
                "{f}: {name}: commands or steps"
            );
            let triggers = [
                t.get("cron").is_some(),
                t.get("interval").is_some(),
                t["postsubmit"] == true,
            ];
            assert!(
                triggers.iter().filter(|x| **x).count() <= 1,
                "{f}: {name}: one trigger"
            );
            if is_container {
                let from = t["container"]["from"].as_str().unwrap();
                assert!(images.contains(from), "{f}: {name} runs in unknown {from}");
                continue;
            }
            let steps = &t["steps"];
            let set_env: BTreeSet<&str> = steps["env"]
                .as_mapping()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str().unwrap())
                .collect();
            let caps = str_list(&t["capabilities"]);
            for phase in ["pre", "test", "post"] {
                for s in steps[phase].as_sequence().into_iter().flatten() {
                    let sname = format!("{name}/{}", s["as"].as_str().unwrap());
                    let from = s["from"].as_str().unwrap();
                    assert!(images.contains(from), "{f}: {sname} runs in unknown {from}");
                    let commands = s["commands"].as_str().unwrap();
                    for k in ["cpu", "memory"] {
                        assert!(
                            s["resources"]["requests"].get(k).is_some(),
                            "{f}: {sname}: {k}"
                        );
                    }
                    if s["nested_podman"] == true {
                        assert!(
                            caps.contains(&"nested-podman"),
                            "{f}: {name}: nested_podman steps need the nested-podman capability"
                        );
                    }
                    // Every variable the commands read is ci-operator's or
                    // a declared parameter with a value.
                    let mut env = BTreeSet::new();
                    for e in s["env"].as_sequence().into_iter().flatten() {
                        let n = e["name"].as_str().unwrap();
                        assert!(
                            e.get("documentation").is_some(),
                            "{f}: {sname}: {n} undocumented"
                        );
                        assert!(
                            e.get("default").is_some()
                                || set_env.contains(n)
                                || DEPLOYMENT_INPUTS.contains(&n),
                            "{f}: {sname}: {n} has no value"
                        );
                        env.insert(n.to_string());
                    }
                    for v in shell_vars(commands) {
                        assert!(
                            env.contains(&v) || CI_OPERATOR_ENV.contains(&v.as_str()),
                            "{f}: {sname} reads ${v}, which nothing sets"
                        );
                    }
                    // Secrets it reads are the credentials it mounts.
                    let mounts: Vec<&str> = s["credentials"]
                        .as_sequence()
                        .into_iter()
                        .flatten()
                        .map(|c| {
                            for key in ["namespace", "name", "mount_path"] {
                                assert!(c.get(key).is_some(), "{f}: {sname}: credential {key}");
                            }
                            c["mount_path"].as_str().unwrap()
                        })
                        .collect();
                    for (i, _) in commands.match_indices("/var/run/") {
                        let dir: String = commands[i..]
                            .split(['/', '"', ' ', '\n'])
                            .filter(|x| !x.is_empty())
                            .take(3)
                            .collect::<Vec<_>>()
                            .join("/");
                        assert!(
                            mounts.iter().any(|m| m.trim_start_matches('/') == dir),
                            "{f}: {sname} reads /{dir}, which it does not mount"
                        );
                    }
                    override_names_an_installed_package(&f, &sname, commands);
                }
            }
        }
    }
}

/// A derive with --override-rpm replaces a package the release installs
/// (strata refuses any other): the RPM the step picks, by its file name
/// pattern `NAME-[0-9]*`, names a package of every manifest derived.
fn override_names_an_installed_package(f: &str, step: &str, commands: &str) {
    for argv in command_lines(commands) {
        if argv.get(1).map(String::as_str) != Some("derive")
            || !argv.iter().any(|a| a == "--override-rpm")
        {
            continue;
        }
        let picked: Vec<&str> = commands
            .match_indices("-[0-9]*")
            .map(|(i, _)| {
                let before = &commands[..i];
                let start = before.rfind(['/', ' ', '(', '"']).map_or(0, |s| s + 1);
                &before[start..]
            })
            .collect();
        assert!(
            !picked.is_empty(),
            "{f}: {step}: no NAME-[0-9]* RPM pattern"
        );
        let manifests: Vec<&String> = argv.iter().filter(|a| a.ends_with(".yaml")).collect();
        assert!(!manifests.is_empty(), "{f}: {step}: no manifest");
        for m in manifests {
            let packages = manifest_packages(&repo().join(m));
            for p in &picked {
                assert!(
                    packages.contains(*p),
                    "{f}: {step}: overrides {p}, which {m} does not install"
                );
            }
        }
    }
}

#[test]
fn command_lines_are_found_in_scripts() {
    let cmds = command_lines(
        "set -e\n# strata derive in a comment\nFROM strata\nstrata derive --base x \\\n  a.yaml --json > out.json\necho strata-like\n",
    );
    assert_eq!(
        cmds,
        [["strata", "derive", "--base", "x", "a.yaml", "--json"]]
    );
    assert_eq!(
        tekton_refs("a $(params.x) $(cat /f) \"$(results.IMAGE_URL.path)\""),
        ["params.x", "results.IMAGE_URL.path"]
    );
    assert_eq!(
        shell_vars("x=\"${SHARED_DIR}/a\" $ARTIFACT_DIR ${rpms[0]} ${#rpms[@]} $1"),
        BTreeSet::from(["ARTIFACT_DIR".to_string(), "SHARED_DIR".to_string()])
    );
}
