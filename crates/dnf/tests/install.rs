//! End-to-end tests on real libdnf and librpm with a signed fixture repo:
//! depsolve results, typed errors, installs with chrooted scriptlets
//! (cross-checked with `rpm -qa`), signature refusal and local RPMs.

mod common;

use std::fs;
use std::time::Instant;

use common::{copy_tree, fixture, require_root, rpm_qa, serve_dir, BUILD_TIME};
use strata_dnf::{DepsolveRequest, Dnf, Error, LocalRpmOptions};

fn names(pkgs: &[strata_dnf::Package]) -> Vec<String> {
    let mut v: Vec<String> = pkgs.iter().map(|p| p.name.clone()).collect();
    v.sort();
    v
}

#[test]
fn depsolve_reports_full_package_metadata() {
    let f = fixture();
    let mut dnf = Dnf::new(f.options("depsolve-metadata"), vec![f.base()]).unwrap();
    let start = Instant::now();
    let mut resolved = dnf.depsolve(&DepsolveRequest::install(["hello"])).unwrap();
    eprintln!("depsolve of hello: {:?}", start.elapsed());
    // Weak dependencies are off by default: no hello-extras.
    assert_eq!(
        names(resolved.packages()),
        ["busybox-sh", "filesystem", "greeting-data", "hello"]
    );
    let hello = resolved
        .packages()
        .iter()
        .find(|p| p.name == "hello")
        .unwrap()
        .clone();
    assert_eq!(hello.nevra, "hello-1.0-1.x86_64", "best version picked");
    assert_eq!(
        (hello.epoch, hello.version.as_str(), hello.release.as_str()),
        (0, "1.0", "1")
    );
    assert_eq!(hello.arch, "x86_64");
    assert_eq!(hello.repo_id, "base");
    assert_eq!(hello.build_time, u64::from(BUILD_TIME));
    assert_eq!(hello.location, "hello-1.0-1.x86_64.rpm");
    assert!(hello.install_size > 0);
    assert!(hello.local_path.is_none(), "not downloaded yet");
    let file = f.base_repo.join(&hello.location);
    assert_eq!(hello.download_size, fs::metadata(&file).unwrap().len());
    let checksum = hello.checksum.clone().expect("repodata checksum");
    assert_eq!(checksum.kind, "sha256");
    let sha = std::process::Command::new("sha256sum")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        checksum.hex,
        String::from_utf8_lossy(&sha.stdout)
            .split_whitespace()
            .next()
            .unwrap()
    );
    assert!(resolved.removed().is_empty());

    resolved.download().unwrap();
    for p in resolved.packages() {
        assert_eq!(
            p.local_path.as_deref(),
            Some(f.base_repo.join(&p.location).as_path()),
            "{}",
            p.name
        );
    }
}

#[test]
fn exact_nevra_requests_pin_versions_as_a_lockfile_would() {
    let f = fixture();
    let mut dnf = Dnf::new(f.options("nevra"), vec![f.base()]).unwrap();
    let resolved = dnf
        .depsolve(&DepsolveRequest::install([
            "hello-0.9-1.x86_64",
            "greeting-data-2.0-1.noarch",
        ]))
        .unwrap();
    let hello = resolved
        .packages()
        .iter()
        .find(|p| p.name == "hello")
        .unwrap();
    assert_eq!(hello.nevra, "hello-0.9-1.x86_64");
}

#[test]
fn weak_dependencies_can_be_enabled() {
    let f = fixture();
    let mut opts = f.options("weak-deps");
    opts.install_weak_deps = true;
    let mut dnf = Dnf::new(opts, vec![f.base()]).unwrap();
    let resolved = dnf.depsolve(&DepsolveRequest::install(["hello"])).unwrap();
    assert!(names(resolved.packages()).contains(&"hello-extras".to_string()));
}

#[test]
fn missing_package_is_a_typed_error_naming_it_and_the_repos() {
    let f = fixture();
    let mut dnf = Dnf::new(f.options("missing"), vec![f.base(), f.rogue()]).unwrap();
    let err = dnf
        .depsolve(&DepsolveRequest::install(["hello", "no-such-package"]))
        .unwrap_err();
    match &err {
        Error::PackageNotFound { name, repos } => {
            assert_eq!(name, "no-such-package");
            assert_eq!(repos, &["base", "rogue"]);
        }
        other => panic!("expected PackageNotFound, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "no package matches 'no-such-package' in repositories [base, rogue]"
    );
}

#[test]
fn unresolvable_requests_carry_libdnf_problem_descriptions() {
    let f = fixture();
    let mut dnf = Dnf::new(f.options("unresolvable"), vec![f.base()]).unwrap();
    let err = dnf
        .depsolve(&DepsolveRequest::install(["broken"]))
        .unwrap_err();
    let Error::Unresolvable { problems } = &err else {
        panic!("expected Unresolvable, got {err:?}")
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("nothing provides does-not-exist needed by broken-1.0-1.noarch"),
        "{problems:?}"
    );

    let err = dnf
        .depsolve(&DepsolveRequest::install(["hello", "hello-conflict"]))
        .unwrap_err();
    let Error::Unresolvable { problems } = &err else {
        panic!("expected Unresolvable, got {err:?}")
    };
    assert!(
        problems.iter().any(|p| p.contains("conflicts with hello")),
        "{problems:?}"
    );

    // Excluding a dependency makes the request unresolvable too.
    let mut req = DepsolveRequest::install(["hello"]);
    req.excludes = vec!["greeting-*".into()];
    let err = dnf.depsolve(&req).unwrap_err();
    let Error::Unresolvable { problems } = &err else {
        panic!("expected Unresolvable, got {err:?}")
    };
    assert!(
        problems.iter().any(|p| p.contains("greeting-data")),
        "{problems:?}"
    );
}

#[test]
fn install_runs_chrooted_scriptlets_and_matches_rpm_qa() {
    require_root();
    let f = fixture();
    let opts = f.options("install");
    let root = opts.install_root.clone();
    let mut dnf = Dnf::new(opts, vec![f.base()]).unwrap();
    let report = dnf.install(&DepsolveRequest::install(["hello"])).unwrap();
    eprintln!("install timings: {:?}", report.timings);
    assert_eq!(
        rpm_qa(&root),
        [
            "busybox-sh-1.35-1.x86_64",
            "filesystem-1.0-1.noarch",
            "greeting-data-2.0-1.noarch",
            "hello-1.0-1.x86_64"
        ]
    );
    assert_eq!(
        fs::read_to_string(root.join("var/lib/hello/post-ran")).unwrap(),
        "hello post 1\n"
    );
    assert_eq!(
        fs::read_link(root.join("bin")).unwrap().to_str(),
        Some("usr/bin")
    );
    assert!(
        root.join("usr/share/doc/hello/README").exists(),
        "docs are installed by default"
    );
    assert!(
        !root.join("var/lib/dnf/history.sqlite").exists(),
        "no dnf history in images"
    );
    assert!(report.packages.iter().all(|p| p.local_path.is_some()));

    // A second depsolve in the same context sees the installed set: nothing to do.
    let resolved = dnf.depsolve(&DepsolveRequest::install(["hello"])).unwrap();
    assert!(resolved.packages().is_empty(), "{:?}", resolved.packages());
    drop(resolved);

    // A local, signed RPM upgrades an installed package.
    let mut local = LocalRpmOptions::default();
    local.gpgkeys = vec![f.trusted_key.clone()];
    let report = dnf
        .install_local_rpms(&[&f.local_greeting_3], &local)
        .unwrap();
    assert_eq!(names(&report.packages), ["greeting-data"]);
    assert_eq!(report.packages[0].repo_id, strata_dnf::CMDLINE_REPO);
    assert_eq!(report.removed, ["greeting-data-2.0-1.noarch"]);
    assert!(rpm_qa(&root).contains(&"greeting-data-3.0-1.noarch".to_string()));

    // ... and, as overrides may, downgrades it; but hello needs >= 2.
    let err = dnf
        .install_local_rpms(&[&f.local_greeting_1], &local)
        .unwrap_err();
    assert!(matches!(err, Error::Unresolvable { .. }), "{err:?}");

    // A local RPM signed by an unknown key is refused before rpm runs.
    let err = dnf
        .install_local_rpms(&[&f.local_greeting_rogue], &local)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Signature { repo, .. } if repo == "@commandline"),
        "{err:?}"
    );
    assert!(rpm_qa(&root).contains(&"greeting-data-3.0-1.noarch".to_string()));
}

#[test]
fn nodocs_skips_documentation() {
    require_root();
    let f = fixture();
    let mut opts = f.options("nodocs");
    opts.nodocs = true;
    let root = opts.install_root.clone();
    let mut dnf = Dnf::new(opts, vec![f.base()]).unwrap();
    dnf.install(&DepsolveRequest::install(["hello"])).unwrap();
    assert!(root.join("usr/share/hello/version").exists());
    assert!(!root.join("usr/share/doc/hello/README").exists());
}

#[test]
fn package_signed_by_unknown_key_is_refused() {
    require_root();
    let f = fixture();
    let opts = f.options("rogue");
    let root = opts.install_root.clone();
    let mut dnf = Dnf::new(opts, vec![f.base(), f.rogue()]).unwrap();
    let resolved = dnf.depsolve(&DepsolveRequest::install(["rogue"])).unwrap();
    assert_eq!(names(resolved.packages()), ["rogue"]);
    let err = resolved.install().unwrap_err();
    match &err {
        Error::Signature {
            nevra,
            repo,
            message,
        } => {
            assert_eq!(nevra, "rogue-1.0-1.noarch");
            assert_eq!(repo, "rogue");
            assert!(!message.is_empty());
        }
        other => panic!("expected a signature error, got {other:?}"),
    }
    assert!(!root.join("usr/share/rogue").exists());

    // With gpgcheck off for that repository the same package installs.
    let mut rogue = f.rogue();
    rogue.gpgcheck = false;
    drop(dnf);
    let mut dnf = Dnf::new(f.options("rogue-unchecked"), vec![rogue]).unwrap();
    dnf.install(&DepsolveRequest::install(["rogue"])).unwrap();
}

#[test]
fn repo_key_that_does_not_exist_is_rejected_up_front() {
    let f = fixture();
    let repo = f.base().with_gpgkey(f.root.join("missing.asc"));
    let err = Dnf::new(f.options("missing-key"), vec![repo]).unwrap_err();
    assert!(err.to_string().contains("missing.asc"), "{err}");
}

#[test]
fn remote_repo_downloads_into_cache_and_verifies_checksums() {
    let f = fixture();
    let url = serve_dir(f.base_repo.clone());
    let repo = strata_dnf::RepoConfig::new("remote", format!("{url}/")).with_gpgkey(&f.trusted_key);
    let opts = f.options("remote");
    let cache = opts.cache_dir.clone();
    let mut dnf = Dnf::new(opts, vec![repo]).unwrap();
    let start = Instant::now();
    let mut resolved = dnf.depsolve(&DepsolveRequest::install(["hello"])).unwrap();
    eprintln!(
        "remote depsolve (metadata download included): {:?}",
        start.elapsed()
    );
    assert_eq!(
        names(resolved.packages()),
        ["busybox-sh", "filesystem", "greeting-data", "hello"]
    );
    resolved.download().unwrap();
    let packages_dir = cache.join("dnf/metadata/remote-8-x86_64/packages");
    for p in resolved.packages() {
        let local = p.local_path.as_ref().unwrap();
        assert_eq!(local, &packages_dir.join(&p.location), "{}", p.name);
        assert_eq!(
            fs::read(local).unwrap(),
            fs::read(f.base_repo.join(&p.location)).unwrap()
        );
    }
    drop(resolved);
    drop(dnf);

    // A mirror serving a tampered package (repodata intact) is caught.
    let tampered = f.root.join("tampered");
    let _ = fs::remove_dir_all(&tampered);
    copy_tree(&f.base_repo, &tampered);
    let victim = tampered.join("greeting-data-2.0-1.noarch.rpm");
    let mut bytes = fs::read(&victim).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&victim, bytes).unwrap();
    let url = serve_dir(tampered);
    let repo = strata_dnf::RepoConfig::new("remote", format!("{url}/")).with_gpgkey(&f.trusted_key);
    let mut dnf = Dnf::new(f.options("remote-tampered"), vec![repo]).unwrap();
    let mut resolved = dnf.depsolve(&DepsolveRequest::install(["hello"])).unwrap();
    let err = resolved.download().unwrap_err();
    eprintln!("tampered download error: {err}");
    assert!(err.to_string().contains("greeting-data"), "{err}");
}

#[test]
fn local_rpm_can_downgrade_an_installed_package() {
    require_root();
    let f = fixture();
    let opts = f.options("downgrade");
    let root = opts.install_root.clone();
    let mut dnf = Dnf::new(opts, vec![f.base()]).unwrap();
    dnf.install(&DepsolveRequest::install(["greeting-data"]))
        .unwrap();
    let mut local = LocalRpmOptions::default();
    local.gpgkeys = vec![f.trusted_key.clone()];
    let report = dnf
        .install_local_rpms(&[&f.local_greeting_1], &local)
        .unwrap();
    assert_eq!(report.removed, ["greeting-data-2.0-1.noarch"]);
    assert_eq!(rpm_qa(&root), ["greeting-data-1.0-1.noarch"]);
    assert_eq!(
        fs::read_to_string(root.join("usr/share/greeting/data.txt")).unwrap(),
        "v1\n"
    );
}

#[test]
fn symlinked_repo_key_is_followed() {
    let f = fixture();
    let link = f.root.join("keys/RPM-GPG-KEY-link");
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(&f.trusted_key, &link).unwrap();
    let repo = strata_dnf::RepoConfig::new("base", format!("file://{}", f.base_repo.display()))
        .with_gpgkey(&link);
    let mut dnf = Dnf::new(f.options("key-symlink"), vec![repo]).unwrap();
    let mut resolved = dnf
        .depsolve(&DepsolveRequest::install(["greeting-data"]))
        .unwrap();
    resolved.download().unwrap();
}

/// rpm said only "Error -1 running transaction" when the install root's
/// filesystem was full: the error now names the cause and the root.
#[test]
fn a_full_filesystem_is_named_as_the_cause() {
    require_root();
    let f = fixture();
    let opts = f.options("full");
    let root = opts.install_root.clone();
    fs::create_dir_all(&root).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=160k", "strata-full"])
        .arg(&root)
        .status()
        .unwrap();
    assert!(mounted.success(), "mounting a tmpfs (needs root)");
    let result = Dnf::new(opts, vec![f.base()])
        .and_then(|mut dnf| dnf.install(&DepsolveRequest::install(["hello"])));
    // Lazily: librpm may still hold the database it could not write.
    let umounted = std::process::Command::new("umount")
        .arg("--lazy")
        .arg(&root)
        .status()
        .unwrap();
    assert!(umounted.success());
    let err = result.unwrap_err();
    assert!(matches!(err, Error::NoSpace { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("no space left") && text.contains(&root.display().to_string()),
        "{text}"
    );
}
