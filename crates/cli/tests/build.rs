//! `strata build` of the demo pipeline as CI runs it (the binary, `--json`),
//! on a copy of the fixture distribution:
//!
//! 1. the first build: every stage builds, one release record;
//! 2. again, nothing changed: nothing rebuilds, exit 0, `changed: false`
//!    everywhere, the history untouched;
//! 3. three "machines" sharing only a registry on 127.0.0.1: compose + push
//!    in one workdir, derive from the registry + push in a second, disks
//!    from the registry in a third — the same digests, commits and disks as
//!    the single-workdir build (disks: the same commit and image; their
//!    bytes name the image as pulled); then `build --push` to that
//!    registry finds every image there already, and rebuilds only the
//!    disks (they name the push target);
//! 4. one release repo updated (a rebuilt kubelet in rhocp-4.13): only that
//!    release's derive and disks rebuild.
//!
//! Beside it, a node's life on the first 4.13 qemu disk (a raw copy, booted
//! under qemu without a snapshot, UEFI and BIOS in turn): its first boot
//! provisions it with an Ignition config from qemu's fw_cfg; the second
//! boot is not a first boot any more; `strata node update` deploys the
//! rebuilt 4.13 of step 4 into it as the node would, which then boots by
//! default with the first build as rollback, both in the menu;
//! `strata node rollback` brings the first build back.
//!
//! Every `--json` output is checked against the shapes in docs/formats.md.
//! The flow is one test, in order: each step needs the state the previous
//! one left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use strata_testdistro::peers::Registry;
use strata_testdistro::spec::{FileSpec, PkgSpec};
use strata_testdistro::{Fixture, Signing};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn demo(name: &str) -> PathBuf {
    repo_root().join("manifests/demo").join(name)
}

/// Runs `strata ARGS… --json`: exit 0 and one JSON object on stdout.
fn strata_json(args: &[&str]) -> Value {
    strata_json_from(Command::new(env!("CARGO_BIN_EXE_strata")), args)
}

/// [`strata_json`] as an ordinary user with subordinate ids (strata-test).
fn strata_json_as_user(args: &[&str]) -> Value {
    let none: [&str; 0] = [];
    strata_json_from(
        strata_testdistro::as_subid_user(env!("CARGO_BIN_EXE_strata"), none),
        args,
    )
}

fn strata_json_from(mut cmd: Command, args: &[&str]) -> Value {
    let t = Instant::now();
    let out = cmd
        .args(args)
        .arg("--json")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    eprintln!("strata {} ({:?})", args.join(" "), t.elapsed());
    assert!(
        out.status.success(),
        "strata {}: {:?}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.trim_end().lines().count(), 1, "one line: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The `json shape:NAME` blocks of docs/formats.md.
fn shapes() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(repo_root().join("docs/formats.md")).unwrap();
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("```json shape:") else {
            continue;
        };
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        let v: Value = serde_json::from_str(&body.join("\n"))
            .unwrap_or_else(|e| panic!("docs/formats.md shape {name}: {e}"));
        out.insert(name.trim().to_string(), v);
    }
    out
}

/// Where `value` does not have the documented shape `template`.
fn mismatches(
    value: &Value,
    template: &Value,
    shapes: &BTreeMap<String, Value>,
    at: &str,
) -> Vec<String> {
    match template {
        Value::String(types) => {
            let fits = types.split('|').any(|t| match t {
                "string" => value.is_string(),
                "number" => value.is_number(),
                "bool" => value.is_boolean(),
                "null" => value.is_null(),
                "object" => value.is_object(),
                "array" => value.is_array(),
                named => {
                    let name = named.strip_prefix('@').expect("a type or @shape");
                    let shape = shapes
                        .get(name)
                        .unwrap_or_else(|| panic!("no shape {name}"));
                    mismatches(value, shape, shapes, at).is_empty()
                }
            });
            if fits {
                vec![]
            } else {
                let mut why = vec![format!("{at}: {value} is not {types}")];
                for named in types.split('|').filter_map(|t| t.strip_prefix('@')) {
                    why.extend(mismatches(value, &shapes[named], shapes, at));
                }
                why
            }
        }
        Value::Object(keys) => match value.as_object() {
            None => vec![format!("{at}: not an object")],
            Some(obj) => keys
                .iter()
                .flat_map(|(k, t)| match obj.get(k) {
                    None => vec![format!("{at}.{k}: missing")],
                    Some(v) => mismatches(v, t, shapes, &format!("{at}.{k}")),
                })
                .collect(),
        },
        Value::Array(t) => match value.as_array() {
            None => vec![format!("{at}: not an array")],
            Some(items) => items
                .iter()
                .enumerate()
                .flat_map(|(i, v)| mismatches(v, &t[0], shapes, &format!("{at}[{i}]")))
                .collect(),
        },
        other => panic!("bad shape {other}"),
    }
}

fn assert_shape(value: &Value, shape: &str) {
    let shapes = shapes();
    let template = shapes
        .get(shape)
        .unwrap_or_else(|| panic!("no shape {shape}"));
    let wrong = mismatches(value, template, &shapes, shape);
    assert!(wrong.is_empty(), "{}\n{value:#}", wrong.join("\n"));
}

/// The fixture, hard-linked into `dir`: its rhocp-4.13 repo will change.
fn fixture_copy(dir: &Path) -> PathBuf {
    strata_testdistro::require_root("the pipeline composes and derives images");
    let f = Fixture::for_tests().expect("the fixture distribution");
    let copy = dir.join("fixture");
    let status = Command::new("cp")
        .arg("-al")
        .arg(&f.root)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    copy
}

/// Replaces the fixture's rhocp-4.13 repo with one where openshift-kubelet
/// is rebuilt (a newer release, signed with the release key).
fn rebuild_kubelet_413(fixture: &Path) {
    let repo = fixture.join("rhocp-4.13-for-rhel-8");
    let new = fixture.join("rhocp-4.13-for-rhel-8.new");
    let mut kubelet = PkgSpec::new(
        "openshift-kubelet",
        "4.13.0",
        "202612010000.p0.rhaos4.13.el8",
    )
    .requires(&["cri-o", "cri-tools", "util-linux"])
    .files([
        FileSpec::file(
            "/usr/bin/kubelet",
            b"#!/bin/sh\necho kubelet 4.13 rebuilt\n".to_vec(),
            0o755,
        ),
        FileSpec::dir("/etc/kubernetes", 0o755),
        FileSpec::dir("/etc/kubernetes/manifests", 0o755),
    ]);
    kubelet.build_time = 1_764_547_200;
    Fixture::build_repo(&new, &[kubelet], Signing::Release).unwrap();
    for e in std::fs::read_dir(repo.join("Packages")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("openshift-kubelet-") {
            std::fs::hard_link(e.path(), new.join("Packages").join(&name)).unwrap();
        }
    }
    let status = Command::new("createrepo_c")
        .args(["--no-database", "--quiet"])
        .arg(&new)
        .status()
        .expect("createrepo_c (Debian package createrepo-c)");
    assert!(status.success());
    std::fs::remove_dir_all(&repo).unwrap();
    std::fs::rename(&new, &repo).unwrap();
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// Runs strata on a pseudo-terminal (util-linux's `script`) of 200 columns
/// and 400 rows, and returns the screen as a terminal shows it at the end.
fn on_terminal(args: &[&str]) -> String {
    on_terminal_as(args, "")
}

/// [`on_terminal`] as an ordinary user with subordinate ids (strata-test).
fn on_terminal_as_user(args: &[&str]) -> String {
    let (uid, gid) = strata_testdistro::subid_user();
    on_terminal_as(
        args,
        &format!("setpriv --reuid={uid} --regid={gid} --clear-groups -- "),
    )
}

fn on_terminal_as(args: &[&str], prefix: &str) -> String {
    let mut command = format!(
        "stty cols 200 rows 400; exec {prefix}{}",
        shlex::try_quote(env!("CARGO_BIN_EXE_strata")).unwrap()
    );
    for a in args {
        command.push(' ');
        command.push_str(&shlex::try_quote(a).unwrap());
    }
    let out = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("TERM", "xterm-256color")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (Debian package bsdutils)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mut parser = vt100::Parser::new(400, 200, 0);
    // A pseudo-terminal turns each \n into \r\n already.
    parser.process(&out.stdout);
    parser.screen().contents()
}

/// strata's record of a build.
fn record_of(build_dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(build_dir.join("strata.json")).unwrap()).unwrap()
}

/// The build's meta.json, once it has passed coreos-assembler's schema
/// rules.
fn cosa_meta_of(build_dir: &Path) -> Value {
    let cosa: Value =
        serde_json::from_slice(&std::fs::read(build_dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        strata_workdir::record::check_cosa_meta(&cosa),
        Vec::<String>::new(),
        "{cosa:#}"
    );
    cosa
}

/// Runs `cmd`, which must succeed; its stdout.
fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn release<'a>(build: &'a Value, r: &str) -> &'a Value {
    build["releases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["release"] == r)
        .unwrap_or_else(|| panic!("no release {r}"))
}

/// Every file under `dir` with its size and mtime.
fn listing(dir: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), (m.len(), m.modified().unwrap()));
            }
        }
    }
    out
}

/// An Ignition config (spec 3.3.0, which Ignition 2.14 reads) that writes
/// a file and an enabled unit; the unit prints [`IGNITION_LINE`] with the
/// file's content on the console before the boot marker.
fn ignition_config(dir: &Path) -> PathBuf {
    let unit = "[Unit]\nDescription=Written by Ignition\nBefore=strata-boot-check.service\n\n\
                [Service]\nType=oneshot\n\
                ExecStart=/bin/sh -c 'echo \"STRATA-IGNITION-UNIT $(cat /etc/strata-node-test)\" >/dev/console'\n\n\
                [Install]\nWantedBy=multi-user.target\n";
    let config = serde_json::json!({
        "ignition": {"version": "3.3.0"},
        "storage": {"files": [{
            "path": "/etc/strata-node-test",
            "mode": 420,
            "contents": {"source": "data:,provisioned-by-ignition"}
        }]},
        "systemd": {"units": [{
            "name": "strata-node-test.service",
            "enabled": true,
            "contents": unit
        }]}
    });
    let path = dir.join("config.ign");
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    path
}

/// What the unit [`ignition_config`] writes prints on every boot.
const IGNITION_LINE: &str = "STRATA-IGNITION-UNIT provisioned-by-ignition";

/// A release's live media boot to `marker`, running its own tree (kubelet
/// and cri-o present) from memory with no disk: the ISO from a CD with
/// BIOS, with an Ignition config embedded as coreos-installer embeds one
/// (Ignition applies it); the PXE kernel with the initramfs and root image
/// concatenated, as PXE loaders load two initrds. (The disk test boots an
/// ISO from a CD with UEFI.)
fn boot_live_media(artifacts: &Value, dir: &Path, marker: &str) {
    use strata_testdistro::boot::{boot, BootSpec, Firmware};
    let path_of = |platform: &str| -> PathBuf {
        let a = artifacts
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["platform"] == platform)
            .unwrap_or_else(|| panic!("no {platform} in {artifacts}"));
        PathBuf::from(s(&a["path"]))
    };
    let mut iso = std::fs::read(path_of("live-iso")).unwrap();
    let config = std::fs::read(ignition_config(dir)).unwrap();
    strata_testdistro::iso::embed_ignition(&mut iso, &config).unwrap();
    let embedded = dir.join("live-embedded.iso");
    std::fs::write(&embedded, &iso).unwrap();
    let initrd = dir.join("live-pxe-initrd");
    let mut joined = std::fs::read(path_of("live-initramfs")).unwrap();
    joined.extend(std::fs::read(path_of("live-rootfs")).unwrap());
    std::fs::write(&initrd, joined).unwrap();

    let cd_bios = BootSpec::live_cd(Firmware::Bios, &embedded);
    let mut pxe = BootSpec::new(
        Firmware::Direct {
            kernel: path_of("live-kernel"),
            initrd,
            append: "console=ttyS0,115200n8 ignition.firstboot ignition.platform.id=metal".into(),
        },
        PathBuf::new(),
    );
    pxe.memory_mib = 2048;
    let booted = std::thread::scope(|scope| {
        [("ISO with a config (BIOS)", &cd_bios), ("PXE", &pxe)]
            .map(|(how, spec)| {
                let mut spec = spec.clone();
                spec.timeout = Duration::from_secs(360);
                (how, scope.spawn(move || boot(&spec)))
            })
            .map(|(how, t)| (how, t.join().unwrap()))
    });
    for (how, res) in booted {
        let res = res.unwrap_or_else(|e| panic!("{how}: {e:#}"));
        eprintln!("live, {how}: booted in {:?}", res.elapsed);
        assert_eq!(res.marker, marker, "{how}");
        assert_eq!(
            res.console.contains(IGNITION_LINE),
            how.contains("config"),
            "{how}: Ignition applied the embedded config, and nothing else"
        );
    }
}

/// Boots the node's disk, keeping what the guest writes; the marker line
/// and the console.
fn boot_node(
    disk: &Path,
    firmware: strata_testdistro::boot::Firmware,
    ignition: Option<&Path>,
) -> (String, String) {
    let mut spec = strata_testdistro::boot::BootSpec::new(firmware, disk);
    spec.snapshot = false;
    // The first boot shares the two cores with the live media's two
    // guests (and with the other test group's): the live boots' limit.
    spec.timeout = Duration::from_secs(360);
    if let Some(config) = ignition {
        spec.fw_cfg
            .push(("opt/com.coreos/config".into(), config.to_path_buf()));
    }
    let booted = strata_testdistro::boot::boot(&spec).unwrap();
    eprintln!("node booted in {:?}: {}", booted.elapsed, booted.marker);
    (booted.marker, booted.console)
}

/// The versions of a `strata node` result's deployments, default first.
fn node_versions(state: &Value) -> Vec<&str> {
    state["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| s(&d["version"]))
        .collect()
}

#[test]
fn build_pipeline_end_to_end_then_nothing_then_one_release() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let fixture = fixture_copy(tmp.path());
    let fixture_var = format!("fixture={}", fixture.display());
    let pipeline = demo("pipeline-rhel-8.6.yaml");
    let w0 = tmp.path().join("w0");
    let build = |extra: &[&str]| {
        let mut args = vec![
            "build",
            pipeline.to_str().unwrap(),
            "--workdir",
            w0.to_str().unwrap(),
            "--var",
            &fixture_var,
        ];
        args.extend_from_slice(extra);
        strata_json(&args)
    };

    // 1. Everything builds.
    let first = build(&[]);
    assert_shape(&first, "build");
    assert_eq!(first["changed"], true);
    assert_eq!(first["base"]["changed"], true);
    assert_eq!(first["name"], "rhcos-rhel-8.6");
    assert_eq!(first["digest"], first["base"]["digest"]);
    assert_eq!(first["base"]["disks"], Value::Null, "no base platforms");
    for r in ["4.12", "4.13"] {
        let rel = release(&first, r);
        assert_eq!(rel["changed"], true, "{r}");
        assert_eq!(rel["base_digest"], first["base"]["digest"]);
        assert!(s(&rel["version"]).starts_with(&format!("4{}.86.", &r[2..])));
        let disks = &rel["disks"];
        assert_eq!(disks["changed"], true);
        let platforms: Vec<&str> = disks["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| s(&a["platform"]))
            .collect();
        let mut expected = vec!["qemu", "metal"];
        if r == "4.13" {
            expected.extend(["live-iso", "live-kernel", "live-initramfs", "live-rootfs"]);
        }
        assert_eq!(platforms, expected);
        for a in disks["artifacts"].as_array().unwrap() {
            assert!(Path::new(s(&a["path"])).exists());
        }
        let build_dir = Path::new(s(&rel["build_dir"]));
        let meta = record_of(build_dir);
        assert_eq!(meta["package_diff"]["previous"], Value::Null);
        // Stored as written (the tests' pipeline says `compress: none`;
        // the demo's publishes gzip, checked in its own test).
        let qemu = &disks["artifacts"][0];
        assert!(s(&qemu["path"]).ends_with(".qcow2"), "{qemu}");
        assert_eq!(meta["disks"]["images"]["qemu"]["sha256"], qemu["sha256"]);
        let cosa = cosa_meta_of(build_dir);
        assert_eq!(cosa["images"]["qemu"]["sha256"], qemu["sha256"]);
        // The image itself, as an OCI archive skopeo reads.
        let archive = build_dir.join(s(&cosa["images"]["ostree"]["path"]));
        let inspected: Value = serde_json::from_str(&run_ok(
            Command::new("skopeo")
                .arg("inspect")
                .arg(format!("oci-archive:{}", archive.display())),
        ))
        .unwrap();
        assert_eq!(
            inspected["Digest"], rel["digest"],
            "{r}: the archive holds the image"
        );
        assert_eq!(
            cosa["images"]["ostree"]["sha256"].as_str().unwrap(),
            sha256_hex(&std::fs::read(&archive).unwrap())
        );
        // The stream's builds directory, as coreos-assembler lays it out.
        let builds: Value =
            serde_json::from_slice(&std::fs::read(build_dir.join("../../builds.json")).unwrap())
                .unwrap();
        assert_eq!(builds["builds"][0]["id"], rel["version"]);
        assert_eq!(
            std::fs::read_link(build_dir.join("../../latest")).unwrap(),
            Path::new(s(&rel["version"]))
        );
    }
    assert_eq!(first["run_id"], "rhcos-rhel-8.6/1");
    assert_eq!(first["run_changed"], true);
    let run_json = PathBuf::from(s(&first["run_json"]));
    let record: Value = serde_json::from_slice(&std::fs::read(&run_json).unwrap()).unwrap();
    assert_eq!(first["bases"][0], first["base"]);
    assert_eq!(
        record["bases"]["rhel-8.6"]["digest"],
        first["base"]["digest"]
    );
    assert_eq!(
        record["bases"]["rhel-8.6"]["version"],
        first["base"]["version"]
    );
    for r in ["4.12", "4.13"] {
        let rel = release(&first, r);
        let entry = &record["releases"][format!("ocp-{r}")];
        assert_eq!(rel["base_stream"], "rhel-8.6");
        assert_eq!(entry["release"], r);
        assert_eq!(entry["base"], "rhel-8.6");
        assert_eq!(entry["digest"], rel["digest"]);
        assert_eq!(entry["version"], rel["version"]);
        assert_eq!(
            entry["bootimages"]["qemu"]["sha256"],
            rel["disks"]["artifacts"][0]["sha256"]
        );
        // What the installer takes: the release's stream, by the stream
        // metadata's own types, and the ConfigMap holding it.
        let dir = run_json.parent().unwrap();
        assert_eq!(entry["installer_stream"], format!("stream-rhcos-{r}.json"));
        let stream: coreos_stream_metadata::Stream = serde_json::from_slice(
            &std::fs::read(dir.join(s(&entry["installer_stream"]))).unwrap(),
        )
        .unwrap();
        assert_eq!(stream.stream, format!("rhcos-{r}"));
        let qcow = &stream.architectures["x86_64"].artifacts["qemu"].formats["qcow2"]["disk"];
        assert_eq!(qcow.sha256, s(&rel["disks"]["artifacts"][0]["sha256"]));
        let metal = &stream.architectures["x86_64"].artifacts["metal"].formats;
        assert_eq!(metal.contains_key("iso"), r == "4.13");
        if r == "4.13" {
            assert_eq!(
                metal["iso"]["disk"].sha256,
                s(&rel["disks"]["artifacts"][2]["sha256"])
            );
            assert_eq!(
                metal["pxe"]["rootfs"].sha256,
                s(&rel["disks"]["artifacts"][5]["sha256"])
            );
        }
        let cm: serde_yaml::Value = serde_yaml::from_slice(
            &std::fs::read(dir.join(s(&entry["bootimages_configmap"]))).unwrap(),
        )
        .unwrap();
        assert_eq!(cm["metadata"]["name"].as_str(), Some("coreos-bootimages"));
        // The installer's placeholder, which the payload build replaces.
        assert_eq!(
            cm["data"]["releaseVersion"].as_str(),
            Some("0.0.1-snapshot")
        );
        assert_eq!(
            cm["metadata"]["namespace"].as_str(),
            Some("openshift-machine-config-operator")
        );
        let embedded: coreos_stream_metadata::Stream =
            serde_json::from_str(cm["data"]["stream"].as_str().unwrap()).unwrap();
        assert_eq!(embedded.stream, stream.stream);
    }
    eprintln!("step 1 (first build) done at {:?}", started.elapsed());

    // A node from the demo's own 4.13 qemu disk (as raw: the form
    // `strata node` changes), whose Ignition reads its config from qemu's
    // fw_cfg (`ignition.platform.id=qemu`). First boot (UEFI, q35): through
    // the real dracut initramfs, where Ignition applies the config, and
    // ostree-prepare-root into real systemd, with the node layer's kubelet
    // in the tree.
    let rel = release(&first, "4.13");
    let version_a = s(&rel["version"]).to_string();
    let qemu = &rel["disks"]["artifacts"][0];
    assert_eq!(qemu["platform"], "qemu");
    let node = tmp.path().join("node.raw");
    let converted = Command::new("qemu-img")
        .args(["convert", "-O", "raw"])
        .arg(s(&qemu["path"]))
        .arg(&node)
        .status()
        .unwrap();
    assert!(converted.success());
    let config = ignition_config(tmp.path());
    // A node's /var is its stateroot's (ostree's generator mounts it); the
    // live system's is its deployment's own, in the live root's tmpfs (its
    // command line names no ostree= deployment for the generator).
    let marker = |version: &str, firstboot: &str| {
        format!(
            "STRATA-BOOT-OK version={version} openshift=4.13 init=systemd kubelet=yes crio=yes \
             firstboot={firstboot} var=stateroot"
        )
    };
    use strata_testdistro::boot::Firmware::{Bios, Uefi};
    // The release's live media boot beside the node.
    let live = std::thread::spawn({
        let artifacts = rel["disks"]["artifacts"].clone();
        let dir = tmp.path().to_path_buf();
        let expected = marker(&version_a, "yes").replace("var=stateroot", "var=root");
        move || boot_live_media(&artifacts, &dir, &expected)
    });
    let (booted, console) = boot_node(&node, Uefi, Some(&config));
    assert_eq!(booted, marker(&version_a, "yes"));
    assert!(console.contains(IGNITION_LINE), "{console}");
    // The second boot (BIOS) is not a first boot: the stamp is gone, and
    // what Ignition wrote is still there.
    let (booted, console) = boot_node(&node, Bios, None);
    assert_eq!(booted, marker(&version_a, "no"));
    assert!(console.contains(IGNITION_LINE), "{console}");
    live.join().expect("the live media's boots");
    eprintln!(
        "step 1 (and the node's first boots) done at {:?}",
        started.elapsed()
    );

    // 2. Nothing changed: nothing rebuilds, nothing is recorded.
    let history = std::fs::read(w0.join("history.json")).unwrap();
    let files = listing(&w0.join("builds"));
    let t = Instant::now();
    let again = build(&[]);
    assert!(t.elapsed().as_secs() < 60, "a no-op took {:?}", t.elapsed());
    assert_shape(&again, "build");
    assert_eq!(again["changed"], false, "{again:#}");
    assert_eq!(again["base"]["changed"], false);
    assert_eq!(again["run_changed"], false);
    assert_eq!(again["run_id"], first["run_id"]);
    for r in ["4.12", "4.13"] {
        let rel = release(&again, r);
        assert_eq!(rel["changed"], false);
        assert_eq!(rel["disks"]["changed"], false);
        assert_eq!(rel["digest"], release(&first, r)["digest"]);
        assert_eq!(
            rel["disks"]["artifacts"],
            release(&first, r)["disks"]["artifacts"]
        );
    }
    assert_eq!(std::fs::read(w0.join("history.json")).unwrap(), history);
    assert_eq!(listing(&w0.join("builds")), files, "no file written");
    // On a terminal: the live region is gone when the command ends, and
    // the log lines and each stage's line stand on lines of their own
    // (none written through a spinner's line).
    let screen = on_terminal(&[
        "build",
        pipeline.to_str().unwrap(),
        "--workdir",
        w0.to_str().unwrap(),
        "--var",
        &fixture_var,
    ]);
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    let spinner = |l: &str| l.chars().any(|c| ('\u{2800}'..='\u{28ff}').contains(&c));
    assert!(!lines.iter().any(|l| spinner(l)), "{screen}");
    for stage in [
        "compose rhel-8.6.yaml",
        "derive ocp-4.12.yaml",
        "derive ocp-4.13.yaml",
        "disk ocp-4.13",
        "record rhcos-rhel-8.6",
    ] {
        let done: Vec<&&str> = lines.iter().filter(|l| l.contains(stage)).collect();
        assert!(
            done.iter()
                .any(|l| l.starts_with(&format!("= {stage} (unchanged) in "))),
            "{stage}: {screen}"
        );
    }
    let logs = lines.iter().filter(|l| l.contains(" INFO ")).count();
    assert!(logs > 0, "{screen}");
    assert!(
        lines
            .iter()
            .filter(|l| l.contains(" INFO "))
            .all(|l| !l.starts_with('=') && !l.starts_with('✔')),
        "{screen}"
    );
    eprintln!("step 2 (no-op) done at {:?}", started.elapsed());

    // 3. Three machines that share only a registry.
    let registry = Registry::start().expect("docker-registry");
    let base_ref = registry.reference("strata/rhel-coreos-base:8.6");
    let node_ref = registry.reference("strata/rhel-coreos:{release}");
    let (w1, w2, w3) = (
        tmp.path().join("w1"),
        tmp.path().join("w2"),
        tmp.path().join("w3"),
    );
    let composed = strata_json(&[
        "compose",
        demo("rhel-8.6.yaml").to_str().unwrap(),
        "--workdir",
        w1.to_str().unwrap(),
        "--var",
        &fixture_var,
        "--push",
        &base_ref,
        "--tls-verify=false",
    ]);
    assert_shape(&composed, "compose");
    assert_eq!(composed["digest"], first["base"]["digest"]);
    assert_eq!(composed["ostree_commit"], first["base"]["ostree_commit"]);
    assert_eq!(composed["pushed"]["changed"], true);

    let derived = strata_json(&[
        "derive",
        "--workdir",
        w2.to_str().unwrap(),
        "--base",
        &base_ref,
        demo("ocp-4.12.yaml").to_str().unwrap(),
        demo("ocp-4.13.yaml").to_str().unwrap(),
        "--var",
        &fixture_var,
        "--push",
        &node_ref,
        "--tls-verify=false",
    ]);
    assert_shape(&derived, "derive");
    for r in ["4.12", "4.13"] {
        let d = release(&derived, r);
        let single = release(&first, r);
        assert_eq!(
            d["digest"], single["digest"],
            "{r}: same image on two machines"
        );
        assert_eq!(d["ostree_commit"], single["ostree_commit"]);
        assert_eq!(d["version"], single["version"]);
        assert_eq!(d["base_digest"], first["base"]["digest"]);
        assert_eq!(
            s(&d["pushed"]["destination"]),
            node_ref.replace("{release}", r)
        );
    }

    let node_413 = node_ref.replace("{release}", "4.13");
    let disk = strata_json(&[
        "disk",
        "--workdir",
        w3.to_str().unwrap(),
        "--image",
        &node_413,
        "--platform",
        "qemu,metal",
        "--tls-verify=false",
        // What the single workdir's pipeline named: its push target.
        "--target-image",
        "docker://localhost:5000/strata/rhel-coreos:4.13",
    ]);
    assert_shape(&disk, "disk");
    let single = release(&first, "4.13");
    assert_eq!(disk["digest"], single["digest"]);
    assert_eq!(disk["ostree_commit"], single["ostree_commit"]);
    assert_eq!(disk["openshift_version"], "4.13");
    // The same bytes, although this machine pulled the image from a
    // registry and the single workdir read it from its own layout.
    let sums = |artifacts: &Value| -> Vec<(String, String)> {
        artifacts
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (s(&a["platform"]).to_string(), s(&a["sha256"]).to_string()))
            .collect()
    };
    // (The single workdir also made the live media, which the disk test
    // rebuilds elsewhere.)
    let disks_only: Vec<(String, String)> = sums(&single["disks"]["artifacts"])
        .into_iter()
        .filter(|(p, _)| !p.starts_with("live-"))
        .collect();
    assert_eq!(sums(&disk["artifacts"]), disks_only);
    let meta3 = record_of(Path::new(s(&disk["build_dir"])));
    assert_eq!(meta3["disks"]["ostree_commit"], single["ostree_commit"]);
    assert_eq!(
        meta3["disks"]["image_reference"],
        "docker://localhost:5000/strata/rhel-coreos:4.13"
    );
    // The record of an image this workdir did not build: what its labels
    // say, in a meta.json that coreos-assembler's schema takes.
    cosa_meta_of(Path::new(s(&disk["build_dir"])));

    // Through a relay that counts what the registry sends.
    let relay = strata_testdistro::peers::CountingRelay::start(&registry.addr).unwrap();
    let relayed = node_413.replace(&registry.addr, &relay.addr);
    let inspected = strata_json(&["inspect", &relayed, "--tls-verify=false"]);
    assert_shape(&inspected, "inspect");
    assert_eq!(inspected["digest"], single["digest"]);
    // From the registry's manifest and config alone: the packages are the
    // ones the local image's layers give, and what the registry sent is a
    // small part of one layer, let alone the image.
    assert_eq!(inspected["pulled_layers"], false, "{inspected}");
    let image_bytes = inspected["total_size"].as_u64().unwrap();
    let smallest_layer = inspected["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["size"].as_u64().unwrap())
        .min()
        .unwrap();
    eprintln!(
        "inspect of a registry image: {} bytes from the registry, image {image_bytes} bytes",
        relay.received()
    );
    assert!(
        relay.received() < 256 * 1024 && relay.received() < image_bytes / 100,
        "{} bytes read for an image of {image_bytes} (smallest layer {smallest_layer})",
        relay.received()
    );
    let local = strata_json(&["inspect", s(&single["image"])]);
    assert_eq!(inspected["packages"], local["packages"]);
    assert!(inspected["packages"].as_array().unwrap().len() > 50);
    // Named by the workdir that derived it, the image shows both commits:
    // its base's (the label) and the one a client builds (derive's).
    let named = strata_json(&[
        "inspect",
        &node_413,
        "--tls-verify=false",
        "--workdir",
        w0.to_str().unwrap(),
    ]);
    assert_eq!(named["derived_commit"], single["ostree_commit"]);
    assert_eq!(named["base_commit"], named["ostree_commit"]);
    assert_ne!(named["base_commit"], named["derived_commit"]);
    assert!(inspected["derived_commit"].is_null(), "{inspected}");
    // A reader that goes away (`| head`): status 141 as for SIGPIPE, no panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["inspect", &node_413, "--tls-verify=false"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let fixture_json = strata_json(&["fixture", "--out", fixture.to_str().unwrap()]);
    assert_shape(&fixture_json, "fixture");

    // The single workdir pushes too: the registry has every digest already.
    let registry_var = format!("registry={}/strata", registry.addr);
    let pushed = build(&["--var", &registry_var, "--push", "--tls-verify=false"]);
    assert_shape(&pushed, "build");
    assert_eq!(pushed["base"]["changed"], false);
    assert_eq!(
        pushed["base"]["pushed"]["changed"], false,
        "compose pushed it"
    );
    for r in ["4.12", "4.13"] {
        let rel = release(&pushed, r);
        assert_eq!(rel["changed"], false);
        assert_eq!(rel["pushed"]["changed"], false, "derive pushed it");
        // Disks name the push target for upgrades: another registry,
        // other disks.
        assert_eq!(rel["disks"]["changed"], true, "{r}");
        let meta = record_of(Path::new(s(&rel["build_dir"])));
        assert_eq!(
            s(&meta["disks"]["image_reference"]),
            format!("docker://{}/strata/rhel-coreos:{r}", registry.addr)
        );
        assert_eq!(
            s(&rel["pushed"]["pullspec"]),
            format!("{}/strata/rhel-coreos@{}", registry.addr, s(&rel["digest"]))
        );
    }
    assert_eq!(pushed["run_changed"], true, "the record gains pullspecs");
    assert_eq!(pushed["run_id"], "rhcos-rhel-8.6/2");
    drop(registry);
    eprintln!("step 3 (three machines) done at {:?}", started.elapsed());

    // 4. One release repo updated: only that release rebuilds.
    rebuild_kubelet_413(&fixture);
    let disks_412: Vec<PathBuf> = release(&first, "4.12")["disks"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| PathBuf::from(s(&a["path"])))
        .collect();
    let before_412 = listing(Path::new(s(&release(&first, "4.12")["build_dir"])));
    let updated = build(&["--var", &registry_var]);
    assert_shape(&updated, "build");
    assert_eq!(updated["changed"], true);
    assert_eq!(updated["base"]["changed"], false);
    assert_eq!(updated["base"]["digest"], first["base"]["digest"]);
    let (u12, u13) = (release(&updated, "4.12"), release(&updated, "4.13"));
    assert_eq!(u12["changed"], false);
    assert_eq!(u12["disks"]["changed"], false);
    assert_eq!(u12["digest"], release(&first, "4.12")["digest"]);
    assert_eq!(u13["changed"], true);
    assert_eq!(u13["disks"]["changed"], true);
    assert_ne!(u13["digest"], release(&first, "4.13")["digest"]);
    assert!(s(&u13["version"]).ends_with("-1"), "{}", u13["version"]);
    for p in &disks_412 {
        assert!(p.exists());
    }
    assert_eq!(
        listing(Path::new(s(&release(&first, "4.12")["build_dir"]))),
        before_412,
        "4.12's build untouched"
    );
    let meta = record_of(Path::new(s(&u13["build_dir"])));
    assert_eq!(
        meta["package_diff"]["previous"],
        release(&first, "4.13")["version"]
    );
    assert_eq!(
        meta["package_diff"]["changed"],
        serde_json::json!([
            "openshift-kubelet-4.13.0-202610200000.p0.rhaos4.13.el8.x86_64 -> openshift-kubelet-4.13.0-202612010000.p0.rhaos4.13.el8.x86_64"
        ])
    );
    assert_eq!(updated["run_id"], "rhcos-rhel-8.6/3");
    let record: Value =
        serde_json::from_slice(&std::fs::read(s(&updated["run_json"])).unwrap()).unwrap();
    assert_eq!(record["releases"]["ocp-4.13"]["digest"], u13["digest"]);
    assert_eq!(record["releases"]["ocp-4.12"]["digest"], u12["digest"]);
    eprintln!(
        "step 4 (one release updated) done at {:?}",
        started.elapsed()
    );

    // The node updates to the rebuilt 4.13, as it would: the new
    // deployment is the default, the first build its rollback, each titled
    // with its version and OpenShift release, with the node's kernel
    // arguments and its /etc (what Ignition wrote) carried over.
    let version_b = s(&u13["version"]).to_string();
    let node_arg = node.to_str().unwrap();
    let updated_node = strata_json(&[
        "node",
        "update",
        "--workdir",
        w0.to_str().unwrap(),
        "--image",
        s(&u13["image"]),
        node_arg,
    ]);
    assert_shape(&updated_node, "node");
    assert_eq!(node_versions(&updated_node), [&version_b, &version_a]);
    let deployments = updated_node["deployments"].as_array().unwrap();
    for (d, v) in deployments.iter().zip([&version_b, &version_a]) {
        assert!(
            s(&d["title"]).contains(&format!("{v} (OpenShift 4.13")),
            "{d}"
        );
        assert!(
            s(&d["options"]).contains("ignition.platform.id=qemu"),
            "{d}"
        );
    }
    assert_eq!(deployments[0]["commit"], u13["ostree_commit"]);
    let (booted, console) = boot_node(&node, Uefi, None);
    assert_eq!(booted, marker(&version_b, "no"));
    assert!(console.contains(IGNITION_LINE), "{console}");
    // GRUB's menu (blscfg) lists both deployments.
    for v in [&version_b, &version_a] {
        assert!(
            console.contains(&format!("CoreOS {v} (OpenShift 4.13")),
            "no menu entry for {v}:\n{console}"
        );
    }
    // Rolled back, the first build boots again (BIOS).
    let rolled = strata_json(&["node", "rollback", node_arg]);
    assert_shape(&rolled, "node");
    assert_eq!(node_versions(&rolled), [&version_a, &version_b]);
    let (booted, _) = boot_node(&node, Bios, None);
    assert_eq!(booted, marker(&version_a, "no"));
    eprintln!(
        "the node updated and rolled back at {:?}",
        started.elapsed()
    );

    // 5. Housekeeping: the workdir lists its builds newest first; pruning
    // to one build per stream removes 4.13's first build (record, tag,
    // disks, the blobs and objects only it had) and the runs before the
    // last, keeps what the last run names, and leaves a workdir in which
    // the pipeline is a no-op.
    let w0s = w0.to_str().unwrap();
    let listed = strata_json(&["list", "--workdir", w0s]);
    let builds_413: Vec<&str> = listed["streams"]["ocp-4.13"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| s(&b["version"]))
        .collect();
    assert_eq!(builds_413, [version_b.as_str(), version_a.as_str()]);
    assert!(
        listed["disk_usage"]["oci"].as_u64().unwrap() > 0,
        "{listed}"
    );
    let dry = strata_json(&["prune", "--workdir", w0s, "--keep", "1", "--dry-run"]);
    let a_id = format!("ocp-4.13/{version_a}");
    assert_eq!(dry["builds"], serde_json::json!([a_id]));
    assert_eq!(
        dry["runs"],
        serde_json::json!(["rhcos-rhel-8.6/1", "rhcos-rhel-8.6/2"])
    );
    assert!(Path::new(s(&release(&first, "4.13")["build_dir"])).exists());
    let pruned = strata_json(&["prune", "--workdir", w0s, "--keep", "1"]);
    assert_eq!(pruned["builds"], dry["builds"]);
    assert_eq!(pruned["runs"], dry["runs"]);
    assert!(pruned["blobs"].as_u64().unwrap() > 0, "{pruned}");
    assert!(pruned["ostree_objects"].as_u64().unwrap() > 0, "{pruned}");
    assert!(!Path::new(s(&release(&first, "4.13")["build_dir"])).exists());
    let repo = format!("--repo={}", w0.join("repo").display());
    let show = |commit: &str| {
        Command::new("ostree")
            .args([repo.as_str(), "show", commit])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(!show(s(&release(&first, "4.13")["ostree_commit"])));
    assert!(show(s(&u13["ostree_commit"])));
    assert!(show(s(&u12["ostree_commit"])));
    let fsck = run_ok(Command::new("ostree").args([repo.as_str(), "fsck"]));
    assert!(fsck.contains("no errors"), "{fsck}");
    let after = strata_json(&["list", "--workdir", w0s]);
    assert_eq!(after["streams"]["ocp-4.13"].as_array().unwrap().len(), 1);
    assert!(
        after["streams"]["ocp-4.13"][0]["image_size"]
            .as_u64()
            .unwrap()
            > 0
    );
    let again = build(&["--var", &registry_var]);
    assert_eq!(again["changed"], false, "{again:#}");
    eprintln!("step 5 (prune) done at {:?}", started.elapsed());
}

/// `strata demo` on a fresh workdir: the demo pipeline's two RHEL lines
/// (8.6 with OpenShift 4.12, 9.6 with 4.19 and 4.20), each release on its
/// own base, plus where the fixtures and pipeline are and the bytes shared
/// and per release; a second run builds nothing.
///
/// Run as an ordinary user with subordinate ids (strata-test), as a
/// developer runs `make demo`: every stage in a user namespace. (The
/// stages' own tests check that such builds give root's bytes.)
#[test]
fn demo_builds_the_pipeline_then_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    strata_testdistro::give_to_subid_user(tmp.path());
    let w = tmp.path().join("w");
    // Fresh, on a terminal (what tmux would show at the end): each stage's
    // line and the log lines stand on lines of their own, and the live
    // region (spinners, byte bars) is gone.
    let screen = on_terminal_as_user(&["demo", "--workdir", w.to_str().unwrap()]);
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    let spinner = |l: &str| l.chars().any(|c| ('\u{2800}'..='\u{28ff}').contains(&c));
    let bar = |l: &str| l.contains("] ") && l.contains('%') && l.contains("=>");
    assert!(!lines.iter().any(|l| spinner(l) || bar(l)), "{screen}");
    for stage in [
        "compose rhel-8.6.yaml",
        "compose rhel-9.6.yaml",
        "derive ocp-4.12.yaml",
        "disk ocp-4.20",
        "record rhcos-demo",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("✔ {stage} in "))),
            "{stage}: {screen}"
        );
    }
    assert!(
        lines
            .iter()
            .filter(|l| l.contains(" INFO "))
            .all(|l| !l.starts_with('=') && !l.starts_with('✔')),
        "{screen}"
    );
    // Then as CI reads it: the same build, now a no-op, as one JSON object.
    let first = strata_json_as_user(&["demo", "--workdir", w.to_str().unwrap()]);
    assert_shape(&first, "build");
    assert_shape(&first, "demo");
    assert_eq!(first["changed"], false);
    let bases: Vec<&str> = first["bases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| s(&b["stream"]))
        .collect();
    assert_eq!(bases, ["rhel-8.6", "rhel-9.6"]);
    for b in bases {
        assert!(first["shared_bytes"][b].as_u64().unwrap() > 0, "{b}");
    }
    let releases: Vec<&str> = first["release_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r[1].as_u64().unwrap() > 0, "{r}");
            s(&r[0])
        })
        .collect();
    assert_eq!(releases, ["4.12", "4.19", "4.20"]);
    for (r, base, version) in [
        ("4.12", "rhel-8.6", "412.86.202610150000-0"),
        ("4.19", "rhel-9.6", "419.96.202610150000-0"),
        ("4.20", "rhel-9.6", "420.96.202610150000-0"),
    ] {
        let rel = release(&first, r);
        assert_eq!(rel["base_stream"], base, "{r}");
        assert_eq!(rel["version"], version, "{r}");
        let disks = &rel["disks"]["artifacts"];
        assert_eq!(disks.as_array().unwrap().len(), 2, "{r}: qemu and metal");
        // Published as RHCOS's are: gzip, with the content's size and hash,
        // in the records and in the installer's stream.
        let qemu = &disks[0];
        assert!(s(&qemu["path"]).ends_with(".qcow2.gz"), "{qemu}");
        let content = run_ok(
            Command::new("sh")
                .arg("-c")
                .arg(format!("gzip -dc {} | sha256sum", s(&qemu["path"]))),
        );
        assert_eq!(
            content.split_whitespace().next(),
            qemu["uncompressed-sha256"].as_str()
        );
        let cosa = cosa_meta_of(Path::new(s(&rel["build_dir"])));
        assert_eq!(
            cosa["images"]["qemu"]["uncompressed-sha256"],
            qemu["uncompressed-sha256"]
        );
        let run = PathBuf::from(s(&first["run_json"]));
        let stream_file = run.parent().unwrap().join(format!("stream-rhcos-{r}.json"));
        let stream: coreos_stream_metadata::Stream =
            serde_json::from_slice(&std::fs::read(stream_file).unwrap()).unwrap();
        let qcow = &stream.architectures["x86_64"].artifacts["qemu"].formats["qcow2.gz"]["disk"];
        assert_eq!(qcow.sha256, s(&qemu["sha256"]));
        assert_eq!(
            qcow.uncompressed_sha256.as_deref(),
            qemu["uncompressed-sha256"].as_str()
        );
    }
}

/// A pipeline naming a platform the disk stage does not build fails before
/// anything is composed, with one error line; a misspelt key names its
/// file, line and column.
#[test]
fn a_bad_pipeline_fails_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    let cases = [
        (
            "edition: 1\nname: x\nbase:\n  manifest: {base}\nreleases:\n  - manifest: {rel}\n    platforms: [aws]\n",
            "unknown platform \"aws\"",
        ),
        (
            "edition: 1\nname: x\nbase:\n  manifest: {base}\nreleases:\n  - manifest: {rel}\n    platfroms: [qemu]\n",
            "pipeline.yaml:7:5: unknown field `platfroms`",
        ),
        // Two bases of one stream, two releases of one number.
        (
            "edition: 1\nname: x\nbases:\n  - manifest: {base}\n  - manifest: {base2}\nreleases:\n  - manifest: {rel}\n    base: {base}\n",
            "are both named rhel-8.6: one pipeline composes each base stream once",
        ),
        (
            "edition: 1\nname: x\nbase:\n  manifest: {base}\nreleases:\n  - manifest: {ocp}\n  - manifest: {okd}\n",
            "okd-4.19.yaml are both 4.19 on base",
        ),
    ];
    // The RHEL 8.6 base again, under another file.
    let base2 = tmp.path().join("again.yaml");
    std::fs::write(
        &base2,
        format!("edition: 1\ninclude: {}\n", demo("rhel-8.6.yaml").display()),
    )
    .unwrap();
    for (text, want) in cases {
        let p = tmp.path().join("pipeline.yaml");
        std::fs::write(
            &p,
            text.replace("{base}", demo("rhel-8.6.yaml").to_str().unwrap())
                .replace("{base2}", base2.to_str().unwrap())
                .replace("{rel}", demo("ocp-4.13.yaml").to_str().unwrap())
                .replace("{ocp}", demo("ocp-4.19.yaml").to_str().unwrap())
                .replace("{okd}", demo("okd-4.19.yaml").to_str().unwrap()),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args([
                "build",
                "--json",
                "--var",
                "fixture=/nonexistent",
                "--workdir",
            ])
            .arg(&w)
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        // With --json, the failure as one object for CI.
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["kind"], "failure");
        assert!(v["error"].as_str().unwrap().contains(want), "{v}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error: ") && last.contains(want),
            "{stderr}"
        );
        assert!(!w.join("history.json").exists());
    }
}

/// `strata build` let go of the workdir's lock between its stages, and a
/// `strata prune` started meanwhile ran in a gap, removing what the next
/// stage was to read. A prune started while a build runs waits for the
/// whole run, saying whose run it waits for; the build never waits for
/// the prune.
#[test]
fn a_prune_started_during_a_build_waits_for_the_whole_run() {
    strata_testdistro::require_root("the pipeline composes and derives images");
    let f = Fixture::for_tests().expect("the fixture distribution");
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = tmp.path().join("pipeline.yaml");
    std::fs::write(
        &pipeline,
        format!(
            "edition: 1\nname: lock\nvariables:\n  fixture: ~\nbase:\n  manifest: {}\nreleases:\n  - manifest: {}\n",
            demo("rhel-8.6.yaml").display(),
            demo("ocp-4.12.yaml").display()
        ),
    )
    .unwrap();
    let w = tmp.path().join("w");
    let strata = |args: &[&str], log: &str| {
        Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(tmp.path().join(log)).unwrap())
            .spawn()
            .unwrap()
    };
    let mut build = strata(
        &[
            "build",
            pipeline.to_str().unwrap(),
            "--workdir",
            w.to_str().unwrap(),
            "--var",
            &format!("fixture={}", f.root.display()),
        ],
        "build.log",
    );
    let lock = w.join(".lock");
    let holder = |pid: u32| format!("pid {pid}: ");
    let started = Instant::now();
    // The base composed and recorded (a prune refuses a workdir without
    // builds): the run goes on to derive.
    while !(std::fs::read_to_string(&lock).is_ok_and(|n| n.starts_with(&holder(build.id())))
        && w.join("history.json").exists())
    {
        assert!(
            build.try_wait().unwrap().is_none(),
            "the build ended before the prune could start"
        );
        assert!(started.elapsed() < Duration::from_secs(600), "no base");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut prune = strata(
        &["prune", "--workdir", w.to_str().unwrap(), "--keep", "1"],
        "prune.log",
    );
    let (built, pruned) = (build.wait().unwrap(), prune.wait().unwrap());
    let log = |name: &str| std::fs::read_to_string(tmp.path().join(name)).unwrap();
    let (build_log, prune_log) = (log("build.log"), log("prune.log"));
    assert!(built.success(), "the build: {build_log}");
    assert!(pruned.success(), "the prune: {prune_log}");
    assert!(
        prune_log.contains(&format!("waiting for {}", holder(build.id())))
            && prune_log.contains("strata build"),
        "{prune_log}"
    );
    assert!(!build_log.contains("waiting for"), "{build_log}");
    // The prune took the lock last: after the run's record, not between
    // two of its stages.
    assert!(
        std::fs::read_to_string(&lock)
            .unwrap()
            .starts_with(&holder(prune.id())),
        "{build_log}"
    );
    let history = strata_workdir::history_of(&w).unwrap();
    assert!(
        history
            .iter()
            .any(|e| e.kind == strata_workdir::EntryKind::Run),
        "{history:?}"
    );
}
