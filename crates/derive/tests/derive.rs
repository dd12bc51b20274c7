//! Derive on the fixture distribution: OCP 4.12 and 4.13 from one demo
//! base, checked with the reference tools (`ostree`, `rpm`) and through
//! strata's own image inspection.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use strata_compose::{compose, ComposeOptions, ComposeResult};
use strata_derive::{derive, DeriveOptions, DeriveResult, Worker};
use strata_manifest::Vars;
use strata_oscontainer::{ImageRef, TransportOptions};
use strata_testdistro::peers::{ostree_ext_client, Registry};
use strata_testdistro::scratch::SharedDir;
use strata_testdistro::spec::{FileSpec, PkgSpec};
use strata_testdistro::Fixture;

fn fixture() -> Fixture {
    strata_testdistro::require_root("derive mounts an overlay and installs RPMs in a chroot");
    Fixture::for_tests().expect("generating the fixture distribution")
}

fn demo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../manifests/demo")
        .join(name)
}

fn vars() -> Vars {
    Vars::from_assignments([format!("fixture={}", fixture().root.display())]).unwrap()
}

fn worker() -> Worker {
    Worker::new(env!("CARGO_BIN_EXE_strata-derive-worker"))
}

/// The demo base, and the base of the z-stream snapshot, composed once
/// into one workdir (in this process: librpm chroots the process during
/// the install, so nothing else may run meanwhile — every test waits here
/// first).
fn bases() -> &'static (SharedDir, ComposeResult, ComposeResult) {
    static BASES: OnceLock<(SharedDir, ComposeResult, ComposeResult)> = OnceLock::new();
    BASES.get_or_init(|| {
        let w = shared("bases");
        let compose_snapshot = |snapshot: &str| {
            let v = Vars::from_assignments([
                format!("fixture={}", fixture().root.display()),
                format!("snapshot={snapshot}"),
            ])
            .unwrap();
            compose(
                &ComposeOptions::new(demo("rhel-8.6.yaml"), w.path(), worker().arg("install"))
                    .vars(v)
                    .source_date_epoch(None),
            )
            .unwrap()
        };
        let first = compose_snapshot("20261101");
        let zstream = compose_snapshot("20261115");
        // In the same breath (librpm again): the demo base with an SELinux
        // policy, in a workdir of its own.
        let lw = shared("labeled");
        let manifest = manifest_over(
            lw.path(),
            "labeled.yaml",
            "rhel-8.6.yaml",
            "packages:\n  - selinux-policy-minimum\n",
        );
        let labeled = compose(
            &ComposeOptions::new(&manifest, lw.path().join("work"), worker().arg("install"))
                .vars(vars())
                .source_date_epoch(None),
        )
        .unwrap();
        LABELED.set((lw, labeled)).ok();
        (w, first, zstream)
    })
}

/// The demo base with selinux-policy-minimum: a base labeled by its policy
/// (composed by [`bases`]; the directory holds the workdir `work`).
static LABELED: OnceLock<(SharedDir, ComposeResult)> = OnceLock::new();

fn labeled_base() -> &'static (SharedDir, ComposeResult) {
    bases();
    LABELED.get().expect("composed with the other bases")
}

fn base() -> (&'static SharedDir, &'static ComposeResult) {
    let (w, b, _) = bases();
    (w, b)
}

/// A workdir of its own holding the demo base (hard links: ostree objects
/// and blobs are immutable; index.json and builds.json are replaced, not
/// written through).
fn workdir_with_base() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    link_base_into(dir.path());
    dir
}

fn link_base_into(dir: &Path) {
    let (w, _) = base();
    for sub in ["repo", "oci", "builds", "history.json"] {
        run(Command::new("cp")
            .arg("-al")
            .arg(w.path().join(sub))
            .arg(dir.join(sub)));
    }
}

/// A workdir shared by this process's tests (see `SharedDir`).
fn shared(name: &str) -> SharedDir {
    SharedDir::new(Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("derive-{name}")))
}

fn run(cmd: &mut Command) -> String {
    strata_process::stdout(cmd).unwrap_or_else(|e| panic!("{e}"))
}

fn derive_in(
    w: &Path,
    manifests: &[PathBuf],
    overrides: &[PathBuf],
) -> anyhow::Result<Vec<DeriveResult>> {
    let (_, b) = base();
    derive_on(w, &b.image_tag(), manifests, overrides)
}

fn derive_on(
    w: &Path,
    base: &str,
    manifests: &[PathBuf],
    overrides: &[PathBuf],
) -> anyhow::Result<Vec<DeriveResult>> {
    derive(
        &DeriveOptions::new(w, base, manifests.to_vec(), worker())
            .vars(vars())
            .overrides(overrides.to_vec())
            .source_date_epoch(None),
    )
}

trait Tag {
    fn image_tag(&self) -> String;
}

impl Tag for ComposeResult {
    /// The base as a tag of the workdir's store (valid in every copy).
    fn image_tag(&self) -> String {
        self.image.rsplit(':').next().unwrap().to_string()
    }
}

fn inspect(w: &Path, tag: &str) -> strata_oscontainer::ImageInfo {
    strata_oscontainer::inspect(
        &ImageRef::oci(&w.join("oci"), tag),
        &TransportOptions::default(),
    )
    .unwrap()
}

fn tag_of(r: &DeriveResult) -> String {
    r.image.rsplit(':').next().unwrap().to_string()
}

fn layers(info: &strata_oscontainer::ImageInfo) -> Vec<String> {
    info.layers.iter().map(|l| l.digest.clone()).collect()
}

fn both() -> Vec<PathBuf> {
    vec![demo("ocp-4.12.yaml"), demo("ocp-4.13.yaml")]
}

/// The demo releases, derived once into their own workdir.
fn derived() -> &'static (SharedDir, Vec<DeriveResult>) {
    static DERIVED: OnceLock<(SharedDir, Vec<DeriveResult>)> = OnceLock::new();
    DERIVED.get_or_init(|| {
        let w = shared("releases");
        link_base_into(w.path());
        let r = derive_in(w.path(), &both(), &[]).unwrap();
        (w, r)
    })
}

/// A workdir of its own holding what [`derived`] made (hard links, as in
/// [`workdir_with_base`]).
fn workdir_with_releases() -> tempfile::TempDir {
    let (dw, _) = derived();
    let w = tempfile::tempdir().unwrap();
    for sub in ["repo", "oci", "builds", "history.json"] {
        run(Command::new("cp")
            .arg("-al")
            .arg(dw.path().join(sub))
            .arg(w.path().join(sub)));
    }
    w
}

#[test]
fn releases_share_every_base_layer_and_add_only_their_packages() {
    let (_, b) = base();
    let (w, results) = derived();
    let w = w.path();
    assert_eq!(results.len(), 2);
    let base_info = inspect(w, &b.image_tag());
    let base_layers = layers(&base_info);
    for (r, release) in results.iter().zip(["4.12", "4.13"]) {
        assert!(r.changed);
        assert_eq!(r.release, release);
        let major_minor = release.replace('.', "");
        assert!(
            r.version.starts_with(&format!("{major_minor}.86.2026")) && r.version.ends_with("-0"),
            "{}",
            r.version
        );
        let info = inspect(w, &tag_of(r));
        let l = layers(&info);
        assert_eq!(
            &l[..base_layers.len()],
            &base_layers[..],
            "base layers reused"
        );
        assert_eq!(l.len(), base_layers.len() + 1);
        assert_eq!(info.labels["com.coreos.openshift-version"], release);
        assert_eq!(
            info.labels["io.openshift.build.versions"],
            format!("machine-os={}", r.version)
        );
        assert_eq!(info.labels["ostree.commit"], b.ostree_commit);

        let d = strata_oscontainer::diff(
            &ImageRef::oci(&w.join("oci"), &b.image_tag()),
            &ImageRef::oci(&w.join("oci"), &tag_of(r)),
            &TransportOptions::default(),
        )
        .unwrap();
        let added: BTreeSet<String> = d.packages_added.iter().map(|p| p.name.clone()).collect();
        for name in ["cri-o", "openshift-kubelet", "openvswitch", "conmon-rs"] {
            assert!(added.contains(name), "{name} in {added:?}");
        }
        assert!(d.packages_removed.is_empty() && d.packages_changed.is_empty());
        assert_eq!(d.layers_shared.len(), base_layers.len());

        // The derived commit: parent is the base, the tree is base + release.
        let repo = format!("--repo={}", w.join("repo").display());
        let parent = run(Command::new("ostree")
            .args([&repo, "rev-parse"])
            .arg(format!("{}^", r.ostree_commit)));
        assert_eq!(parent.trim(), b.ostree_commit);
        let co = tempfile::tempdir().unwrap();
        let dest = co.path().join("t");
        // A copy: rpm writes to the database it queries, and a hard-linked
        // checkout would let it write into the repository's objects.
        run(Command::new("ostree")
            .args([&repo, "checkout", "-U", "--force-copy"])
            .arg(&r.ostree_commit)
            .arg(&dest));
        let os_release = std::fs::read_to_string(dest.join("usr/lib/os-release")).unwrap();
        assert!(
            os_release.contains(&format!("OPENSHIFT_VERSION=\"{release}\"")),
            "{os_release}"
        );
        assert!(
            os_release.contains(&format!("VERSION=\"{}\"", r.version)),
            "{os_release}"
        );
        assert!(os_release.contains("RHEL_VERSION=\"8.6\""), "{os_release}");
        // The MCO's rule: ID rhcos (or scos), or VARIANT_ID coreos.
        for line in ["ID=\"rhcos\"", "VARIANT_ID=\"coreos\""] {
            assert!(
                os_release.lines().any(|l| l == line),
                "{line}: {os_release}"
            );
        }
        assert!(
            os_release.contains(&format!("VERSION_ID=\"{release}\"")),
            "{os_release}"
        );
        assert!(
            !dest.join("etc").exists(),
            "configuration stays in /usr/etc"
        );
        assert!(dest.join("usr/etc/openvswitch/system-id.conf").is_file());
        // The node layer's own steps (manifests/demo/node-layer.yaml): a
        // file from add-files, and postprocess output that read the
        // release's os-release.
        assert!(
            std::fs::read_to_string(dest.join("usr/lib/tmpfiles.d/openshift-node.conf"))
                .unwrap()
                .contains("d /var/lib/cni 0755 root root - -")
        );
        let motd = std::fs::read_to_string(dest.join("usr/etc/motd")).unwrap();
        assert!(
            motd.contains(&format!("Part of OpenShift {release},"))
                && motd.contains(&format!("CoreOS {}", r.version)),
            "{motd}"
        );
        assert_eq!(
            std::fs::read_link(dest.join("usr/libexec/crio/conmon")).unwrap(),
            Path::new("../../bin/conmon")
        );
        assert!(dest.join("usr/share/containers/oci/hooks.d").is_dir());
        // The layer keeps the base's Berkeley DB rpmdb, now listing both.
        assert!(!dest.join("usr/share/rpm/rpmdb.sqlite").exists());
        let qa = run(Command::new("rpm")
            .args(["--define", "_db_backend bdb_ro", "--dbpath"])
            .arg(dest.join("usr/share/rpm"))
            .args(["-qa", "--qf", "%{NAME}\\n"]));
        let installed: BTreeSet<&str> = qa.lines().collect();
        assert!(installed.contains("openshift-kubelet") && installed.contains("bash"));
        assert_eq!(installed.len(), b.packages + r.packages.len());
        // So does the image's own rpm, which reads Berkeley DB alone.
        let own = run(strata_testdistro::tree_rpm(&dest).args(["-qa", "--qf", "%{NAME}\n"]));
        assert_eq!(own.lines().collect::<BTreeSet<&str>>(), installed);
        let users = std::fs::read_to_string(dest.join("usr/lib/passwd")).unwrap();
        assert!(
            users.contains("sshd:") && users.contains("openvswitch:"),
            "{users}"
        );
        let tmpfiles =
            std::fs::read_to_string(dest.join(strata_rootfs::tree::LAYER_VAR_TMPFILES)).unwrap();
        assert!(tmpfiles.contains("/var/lib/openvswitch"), "{tmpfiles}");
        assert_eq!(std::fs::read_dir(dest.join("var")).unwrap().count(), 0);
    }
    let fsck = run(Command::new("ostree")
        .arg("fsck")
        .arg(format!("--repo={}", w.join("repo").display())));
    assert!(fsck.contains("no errors"), "{fsck}");
}

/// The kernel directory of a commit, and the checksum of its initramfs
/// (`ostree ls -C`).
fn initramfs_of(w: &Path, commit: &str) -> (String, String) {
    let repo = format!("--repo={}", w.join("repo").display());
    let dirs = run(Command::new("ostree").args([&repo, "ls", commit, "/usr/lib/modules"]));
    let kver = dirs
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .find_map(|p| p.strip_prefix("/usr/lib/modules/"))
        .expect("a kernel directory")
        .to_string();
    let image = format!("/usr/lib/modules/{kver}/initramfs.img");
    let ls = run(Command::new("ostree").args([&repo, "ls", "-C", commit, &image]));
    let checksum = ls
        .split_whitespace()
        .nth(4)
        .expect("a checksum")
        .to_string();
    (kver, checksum)
}

/// The files of a commit's initramfs, as `lsinitrd` lists them.
fn initramfs_files(w: &Path, commit: &str) -> BTreeSet<String> {
    let (kver, _) = initramfs_of(w, commit);
    let out = tempfile::tempdir().unwrap();
    let image = out.path().join("initramfs.img");
    let bytes = strata_process::run(
        Command::new("ostree")
            .arg(format!("--repo={}", w.join("repo").display()))
            .args(["cat", commit])
            .arg(format!("/usr/lib/modules/{kver}/initramfs.img")),
    )
    .unwrap()
    .stdout;
    std::fs::write(&image, bytes).unwrap();
    strata_testdistro::initrd::list(&image)
        .unwrap()
        .into_iter()
        .collect()
}

/// The derived build's own part of its record, once coreos-assembler's
/// meta.json beside it has passed its schema's rules.
fn meta_of(r: &DeriveResult) -> strata_workdir::record::DerivedMeta {
    let cosa: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        strata_workdir::record::check_cosa_meta(&cosa),
        Vec::<String>::new(),
        "{cosa:#}"
    );
    assert_eq!(cosa["name"], "rhcos");
    assert_eq!(cosa["buildid"], r.version.as_str());
    let meta: strata_workdir::BuildMeta =
        serde_json::from_slice(&std::fs::read(r.build_dir.join("strata.json")).unwrap()).unwrap();
    meta.derived.expect("a derived build's record")
}

/// On RHEL 8 Ignition comes with the node layer: its dracut module must
/// reach the initramfs the derived image boots with. 4.13's layer adds it
/// and carries an initramfs made again (same generator and arguments as
/// the base's, recorded in the base commit); 4.12's touches nothing dracut
/// reads and keeps the base's. (Two derives of the same inputs giving the
/// same image, regenerated initramfs included, is
/// `unchanged_inputs_rebuild_nothing_and_rebuilds_are_byte_identical`.)
#[test]
fn a_layer_that_adds_ignition_carries_an_initramfs_with_ignition() {
    let (_, b) = base();
    let (w, results) = derived();
    let w = w.path();
    let (kver, base_initramfs) = initramfs_of(w, &b.ostree_commit);
    let base_files = initramfs_files(w, &b.ostree_commit);
    assert!(
        base_files.contains("usr/lib/ostree/ostree-prepare-root"),
        "{base_files:?}"
    );
    assert!(!base_files.contains("usr/bin/ignition"));

    let (r412, r413) = (&results[0], &results[1]);
    let m412 = meta_of(r412);
    assert!(!m412.initramfs.regenerated, "{:?}", m412.initramfs);
    assert_eq!(m412.initramfs.changed_inputs, 0);
    assert_eq!(
        initramfs_of(w, &r412.ostree_commit),
        (kver.clone(), base_initramfs.clone()),
        "4.12 keeps the base's initramfs"
    );

    let m413 = meta_of(r413);
    assert!(m413.initramfs.regenerated, "{:?}", m413.initramfs);
    assert!(!m413.initramfs.requested);
    assert!(
        m413.initramfs
            .changed_inputs_shown
            .iter()
            .any(|p| p == "usr/lib/dracut/modules.d/30ignition/module-setup.sh"),
        "{:?}",
        m413.initramfs
    );
    assert_eq!(
        m413.initramfs.command,
        [
            "/usr/bin/dracut".to_string(),
            "--no-hostonly".into(),
            "--reproducible".into(),
            // dracut would use gzip: strata compresses it on every core.
            "--no-compress".into(),
            "--kver".into(),
            kver.clone(),
            "-f".into(),
            format!("/usr/lib/modules/{kver}/initramfs.img"),
        ]
    );
    let (kver413, initramfs413) = initramfs_of(w, &r413.ostree_commit);
    assert_eq!(kver413, kver);
    assert_ne!(initramfs413, base_initramfs);
    let files = initramfs_files(w, &r413.ostree_commit);
    for f in [
        // the binary, which the package keeps in the module's directory
        "usr/bin/ignition",
        "usr/lib/systemd/system-generators/ignition-generator",
        "usr/lib/systemd/system/ignition-fetch-offline.service",
        "usr/lib/systemd/system/ignition-files.service",
        "usr/lib/systemd/system/ignition-complete.target",
        // what the base's initramfs had stays
        "usr/lib/ostree/ostree-prepare-root",
    ] {
        assert!(files.contains(f), "{f} not in the 4.13 initramfs");
    }
    // Everything the base's initramfs had stays, but `/root`: compose ran
    // dracut before the ostree conventions made /root a link into /var,
    // and dracut copies that link only when its target exists (nothing in
    // the initramfs uses it).
    let lost: Vec<&String> = base_files.difference(&files).collect();
    assert_eq!(lost, ["root"], "lost from the base's initramfs");
}

/// `regenerate-initramfs: true` makes the initramfs again in a layer that
/// changes none of its inputs (4.12's), with the base's generator.
#[test]
fn a_release_that_asks_for_it_gets_a_new_initramfs_without_changing_its_inputs() {
    let (_, b) = base();
    let w = workdir_with_base();
    let m = tempfile::tempdir().unwrap();
    let manifest = manifest_over(
        m.path(),
        "ocp-4.12-initramfs.yaml",
        "ocp-4.12.yaml",
        "regenerate-initramfs: true\n",
    );
    let r = derive_in(w.path(), &[manifest], &[]).unwrap();
    let meta = meta_of(&r[0]);
    assert!(
        meta.initramfs.regenerated && meta.initramfs.requested,
        "{:?}",
        meta.initramfs
    );
    assert_eq!(meta.initramfs.changed_inputs, 0);
    let (_, base_initramfs) = initramfs_of(w.path(), &b.ostree_commit);
    let (_, initramfs) = initramfs_of(w.path(), &r[0].ostree_commit);
    assert_ne!(initramfs, base_initramfs, "the layer carries its own");
    let files = initramfs_files(w.path(), &r[0].ostree_commit);
    assert!(files.contains("usr/lib/ostree/ostree-prepare-root"));
    assert!(!files.contains("usr/bin/ignition"));
}

#[test]
fn unchanged_inputs_rebuild_nothing_and_rebuilds_are_byte_identical() {
    let (w, first) = derived();
    let again = derive_in(w.path(), &both(), &[]).unwrap();
    for (a, b) in first.iter().zip(&again) {
        assert!(!b.changed, "inputhash {} then {}", a.inputhash, b.inputhash);
        assert_eq!((&a.version, &a.digest), (&b.version, &b.digest));
    }
    // In a fresh workdir, by an ordinary user (strata-test, with
    // subordinate ids, as root of a user namespace): the same images and
    // commits as root's.
    let fresh = tempfile::tempdir().unwrap();
    let w2 = fresh.path().join("w");
    std::fs::create_dir(&w2).unwrap();
    let (_, b) = base();
    for sub in ["repo", "oci", "builds", "history.json"] {
        run(Command::new("cp")
            .arg("-a")
            .arg(bases().0.path().join(sub))
            .arg(w2.join(sub)));
    }
    let (uid, gid) = strata_testdistro::subid_user();
    run(Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(&w2));
    strata_testdistro::give_to_subid_user(&w2);
    let mut args = vec![
        "derive".into(),
        w2.clone().into_os_string(),
        b.image_tag().into(),
        format!("fixture={}", fixture().root.display()).into(),
    ];
    args.extend(both().into_iter().map(PathBuf::into_os_string));
    let out = strata_testdistro::as_subid_user(env!("CARGO_BIN_EXE_strata-derive-worker"), args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(other.len(), first.len());
    for (a, b) in first.iter().zip(&other) {
        assert_eq!(b["changed"], true);
        assert_eq!(b["digest"], a.digest.as_str(), "same inputs, same image");
        assert_eq!(b["ostree_commit"], a.ostree_commit.as_str());
    }
}

/// openshift-kubelet rebuilt by "CI": unsigned, same name, new release.
fn rebuilt_kubelet(dir: &Path) -> PathBuf {
    let mut p = PkgSpec::new("openshift-kubelet", "4.13.0", "202612011200.p0.ci.el8")
        .requires(&["cri-o", "cri-tools", "util-linux"])
        .files([
            FileSpec::file(
                "/usr/bin/kubelet",
                b"#!/bin/sh\necho rebuilt kubelet\n".to_vec(),
                0o755,
            ),
            FileSpec::dir("/etc/kubernetes", 0o755),
        ]);
    p.build_time = 1_764_590_400;
    let path = dir.join(p.file_name());
    p.build(None, &path).unwrap();
    path
}

#[test]
fn an_override_rpm_changes_only_the_derived_layer_of_its_release() {
    let w = workdir_with_base();
    let w = w.path();
    let before = derive_in(w, &both(), &[]).unwrap();
    let rpms = tempfile::tempdir().unwrap();
    let kubelet = rebuilt_kubelet(rpms.path());
    let after = derive_in(w, &[demo("ocp-4.13.yaml")], std::slice::from_ref(&kubelet)).unwrap();
    let r = &after[0];
    assert!(r.changed);
    assert_eq!(r.overrides.len(), 1);
    assert!(r.packages.iter().any(|p| p.contains("202612011200.p0.ci")));
    let old = inspect(w, &tag_of(&before[1]));
    let new = inspect(w, &tag_of(r));
    let (lo, ln) = (layers(&old), layers(&new));
    assert_eq!(lo.len(), ln.len());
    assert_eq!(
        lo[..lo.len() - 1],
        ln[..ln.len() - 1],
        "base layers untouched"
    );
    assert_ne!(lo.last(), ln.last());
    assert!(
        new.labels["strata.overrides"].contains("openshift-kubelet-4.13.0-202612011200.p0.ci.el8")
    );
    // 4.12 was not rebuilt: its tag still names the same image.
    assert_eq!(
        inspect(w, &tag_of(&before[0])).manifest_digest,
        before[0].digest
    );
    let serial: Vec<&str> = r.version.rsplitn(2, '-').collect();
    assert_eq!(
        serial[0], "1",
        "a second build of the same base date: {}",
        r.version
    );
}

fn builds_json(w: &Path) -> String {
    std::fs::read_to_string(w.join("history.json")).unwrap_or_default()
}

/// `dir/name`: a manifest that includes the demo manifest `demo_file` and
/// adds `body`.
fn manifest_over(dir: &Path, name: &str, demo_file: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("edition: 1\ninclude: {}\n{body}", demo(demo_file).display()),
    )
    .unwrap();
    path
}

fn release_manifest(dir: &Path, extra: &str) -> PathBuf {
    manifest_over(
        dir,
        "release.yaml",
        "rhel-8.6-repos.yaml",
        &format!("release: \"4.13\"\n{extra}"),
    )
}

#[test]
fn bad_input_fails_clearly_and_writes_nothing() {
    let w = workdir_with_base();
    let w = w.path();
    let f = fixture();
    let m = tempfile::tempdir().unwrap();
    let before = builds_json(w);
    let err_of = |manifests: &[PathBuf], overrides: &[PathBuf]| -> String {
        format!("{:#}", derive_in(w, manifests, overrides).unwrap_err())
    };

    // A package only in epel-8, whose repo is listed but not allowed.
    let epel = release_manifest(
        m.path(),
        &format!(
            "repos:\n  - id: epel-8\n    baseurl: file://{}\npackages: [htop]\n",
            f.path("epel-8").display()
        ),
    );
    let e = err_of(&[epel], &[]);
    assert!(e.contains("htop") && e.contains("epel-8"), "{e}");

    // crun needs a newer libseccomp than the base has.
    let rhocp = format!(
        "repos:\n  - id: rhocp-4.13-for-rhel-8\n    baseurl: file://{0}\n    gpgkey: file://{1}\ninputs:\n  repos: [rhocp-4.13-for-rhel-8]\npackages: [crun]\n",
        f.path("rhocp-4.13-for-rhel-8").display(),
        f.path("keys/RPM-GPG-KEY-strata-fixture-release").display()
    );
    let crun = release_manifest(m.path(), &rhocp);
    let e = err_of(std::slice::from_ref(&crun), &[]);
    assert!(
        e.contains("crun-1.8.4")
            && e.contains("libseccomp >= 2.5.3")
            && e.contains("allow-base-upgrade"),
        "{e}"
    );

    // Asking for a base package that a newer snapshot updates blames the
    // request, not the packages that need the library.
    let newer = release_manifest(
        m.path(),
        &format!(
            "repos:\n  - id: zstream-baseos\n    baseurl: file://{0}\n    gpgkey: file://{1}\ninputs:\n  repos: [zstream-baseos]\npackages: [glibc]\n",
            f.path(&f.repo("rhel-8.6-baseos", Some(&f.info.snapshots[1])).unwrap().dir).display(),
            f.path("keys/RPM-GPG-KEY-strata-fixture-release").display()
        ),
    );
    let e = err_of(std::slice::from_ref(&newer), &[]);
    assert!(
        e.contains("packages asks for glibc, which would update base package glibc-2.28-189.5")
            && e.contains("allow-base-upgrade")
            && !e.contains(" needs "),
        "{e}"
    );

    // A package whose %post exits 3 (it comes from the base's repos).
    let failing = release_manifest(m.path(), "packages: [failing-post]\n");
    let e = err_of(std::slice::from_ref(&failing), &[]);
    assert!(
        e.contains(
            "package failing-post-1.0-1.el8.x86_64: its %post scriptlet failed (exit status 3)"
        ) && e.contains("cannot reach the configuration service"),
        "{e}"
    );

    // A package that changes the EFI bootloader, which nodes take from the
    // base only.
    let mut efi = PkgSpec::new("strata-layered-efi", "1.0", "1.el8");
    efi.files
        .push(FileSpec::file("/boot/efi/EFI/redhat/extra.efi", "x", 0o700));
    efi.build_time = 1_792_022_400;
    let efi_repo = m.path().join("efi-repo");
    Fixture::build_repo(&efi_repo, &[efi], strata_testdistro::Signing::Release).unwrap();
    let layered = release_manifest(
        m.path(),
        &format!(
            "repos:\n  - id: efi\n    baseurl: file://{0}\n    gpgkey: file://{1}\ninputs:\n  repos: [efi]\npackages: [strata-layered-efi]\n",
            efi_repo.display(),
            f.path("keys/RPM-GPG-KEY-strata-fixture-release").display()
        ),
    );
    let e = err_of(std::slice::from_ref(&layered), &[]);
    assert!(
        e.contains("/boot/efi/EFI/redhat/extra.efi (package strata-layered-efi-1.0-1.el8.x86_64)")
            && e.contains("cannot change the EFI bootloader"),
        "{e}"
    );

    // A missing override RPM.
    let e = err_of(&[demo("ocp-4.13.yaml")], &[m.path().join("missing.rpm")]);
    assert!(e.contains("missing.rpm"), "{e}");

    // A derived image is no base.
    let (dw, results) = derived();
    let e = format!(
        "{:#}",
        derive(
            &DeriveOptions::new(
                w,
                format!(
                    "oci:{}:{}",
                    dw.path().join("oci").display(),
                    tag_of(&results[1])
                ),
                vec![demo("ocp-4.13.yaml")],
                worker()
            )
            .vars(vars())
        )
        .unwrap_err()
    );
    assert!(e.contains("not a base image"), "{e}");

    // A corrupt base image (one chunk's bytes changed) elsewhere.
    let (bw, b) = base();
    let corrupt = m.path().join("corrupt-oci");
    run(Command::new("cp")
        .arg("-r")
        .arg(bw.path().join("oci"))
        .arg(&corrupt));
    let info = inspect(bw.path(), &b.image_tag());
    let chunk = &info.layers[1].digest;
    let blob = corrupt
        .join("blobs/sha256")
        .join(chunk.trim_start_matches("sha256:"));
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::remove_file(&blob).unwrap();
    std::fs::write(&blob, bytes).unwrap();
    // Into an empty workdir (the demo's already holds the good blob).
    let fresh = tempfile::tempdir().unwrap();
    let e = format!(
        "{:#}",
        derive(
            &DeriveOptions::new(
                fresh.path(),
                format!("oci:{}:{}", corrupt.display(), b.image_tag()),
                vec![demo("ocp-4.13.yaml")],
                worker()
            )
            .vars(vars())
        )
        .unwrap_err()
    );
    assert!(e.to_lowercase().contains("digest"), "{e}");
    assert!(strata_oscontainer::list_tags(&fresh.path().join("oci"))
        .unwrap_or_default()
        .is_empty());
    assert_eq!(builds_json(fresh.path()), "");

    assert_eq!(builds_json(w), before, "nothing recorded");

    // Allowed, the same release derives, updating libseccomp.
    let allowed = release_manifest(
        m.path(),
        &format!("{rhocp}allow-base-upgrade: [libseccomp]\n"),
    );
    let r = derive_in(w, &[allowed], &[]).unwrap();
    assert!(r[0]
        .packages
        .iter()
        .any(|p| p.starts_with("libseccomp-2.5.3")));

    // Listed in ignore-scripts, the failing %post is let through and
    // recorded. A unit the manifest adds to /etc is enabled there.
    std::fs::write(
        m.path().join("node-report.service"),
        "[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
    let ignored = release_manifest(
        m.path(),
        "packages: [failing-post]\nignore-scripts: [failing-post]\n\
         add-files:\n  - {src: node-report.service, dest: /etc/systemd/system/node-report.service}\n\
         units: [node-report.service]\n",
    );
    let r = derive_in(w, &[ignored], &[]).unwrap();
    let listed = run(Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args(["ls", &r[0].ostree_commit])
        .arg("/usr/etc/systemd/system/multi-user.target.wants/node-report.service"));
    assert!(
        listed
            .trim_end()
            .ends_with("-> /etc/systemd/system/node-report.service"),
        "{listed}"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r[0].build_dir.join("strata.json")).unwrap())
            .unwrap();
    assert_eq!(
        meta["ignored_scriptlet_failures"],
        serde_json::json!(["%post(failing-post-1.0-1.el8.x86_64) scriptlet failed, exit status 3"]),
        "{meta}"
    );
}

/// The root tree of a commit as ostree-ext's client reports it:
/// `contents:meta` checksums.
fn root_tree(repo: &Path, commit: &str) -> String {
    let repo = ostree::Repo::new_for_path(repo);
    repo.open(ostree::gio::Cancellable::NONE).unwrap();
    let (v, _) = repo.load_commit(commit).unwrap();
    let hex = |i| hex::encode(v.child_value(i).data_as_bytes());
    format!("{}:{}", hex(6), hex(7))
}

fn insecure() -> TransportOptions {
    let mut t = TransportOptions::default();
    t.tls_verify = false;
    t
}

/// On a base its own SELinux policy labels, the derived commit is labeled
/// as the ostree-ext client labels its merge of the image: every path by
/// the policy, derived files included, other xattrs kept.
#[test]
fn on_a_labeled_base_the_derived_commit_has_the_clients_labels() {
    let (lw, b) = labeled_base();
    let w = lw.path().join("work");
    let r = derive_on(&w, &b.image_tag(), &[demo("ocp-4.13.yaml")], &[]).unwrap();
    let r = &r[0];
    let ours = root_tree(&w.join("repo"), &r.ostree_commit);
    let client = ostree_ext_client().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json: serde_json::Value = serde_json::from_str(
        run(Command::new(client)
            .arg("import")
            .arg(dir.path().join("client"))
            .arg(&r.image))
        .trim(),
    )
    .unwrap();
    assert_eq!(json["merge_tree"], ours.as_str(), "{json}");
    let listed = run(Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args([
            "ls",
            "-X",
            &r.ostree_commit,
            "/usr/bin/kubelet",
            "/usr/bin/newuidmap",
        ]));
    assert!(
        listed.contains("system_u:object_r:bin_t:s0") && listed.contains("security.capability"),
        "{listed}"
    );
}

#[test]
fn the_real_client_imports_and_deploys_a_derived_image_and_a_registry_base_derives_the_same() {
    let (_, b) = base();
    let (w, results) = derived();
    let r = &results[1];
    let client = ostree_ext_client().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ours = root_tree(&w.path().join("repo"), &r.ostree_commit);
    let import = |name: &str, image: &str, insecure: bool| -> serde_json::Value {
        let mut cmd = Command::new(client);
        cmd.arg("import").arg(dir.path().join(name)).arg(image);
        if insecure {
            cmd.arg("--insecure");
        }
        serde_json::from_str(run(&mut cmd).trim()).unwrap()
    };

    // From the OCI layout.
    let json = import("layout", &r.image, false);
    assert_eq!(json["base_commit"], b.ostree_commit.as_str());
    assert_eq!(json["merge_tree"], ours.as_str(), "{json}");

    // From a registry: base and derived image pushed.
    let registry = Registry::start().unwrap();
    let local = |image: &str| ImageRef::parse(image, None).unwrap();
    let base_ref = registry.reference("rhcos/base:8.6");
    let node_ref = registry.reference("rhcos/node:4.13");
    let base_image = format!("oci:{}:{}", w.path().join("oci").display(), b.image_tag());
    strata_oscontainer::push(&local(&base_image), &local(&base_ref), &insecure()).unwrap();
    strata_oscontainer::push(&local(&r.image), &local(&node_ref), &insecure()).unwrap();
    let json = import("registry", &node_ref, true);
    assert_eq!(json["merge_tree"], ours.as_str(), "{json}");

    // Another machine: an empty workdir deriving from the registry's base
    // builds the same image.
    let elsewhere = tempfile::tempdir().unwrap();
    let again = derive(
        &DeriveOptions::new(
            elsewhere.path(),
            base_ref.as_str(),
            vec![demo("ocp-4.13.yaml")],
            worker(),
        )
        .vars(vars())
        .source_date_epoch(None)
        .transport(insecure()),
    )
    .unwrap();
    assert_eq!(again[0].digest, r.digest);
    assert_eq!(again[0].ostree_commit, r.ostree_commit);

    // ostree-ext deploys it (a tmpfs /boot in a private mount namespace:
    // deploying freezes the filesystem holding /boot).
    let sysroot = dir.path().join("sysroot");
    let _drop_sysroot = strata_testdistro::scratch::DropSysroot(sysroot.clone());
    std::fs::create_dir_all(&sysroot).unwrap();
    run(Command::new("ostree")
        .args(["admin", "init-fs", "--modern"])
        .arg(&sysroot));
    run(Command::new("ostree")
        .args(["admin", "os-init", "rhcos"])
        .arg(format!("--sysroot={}", sysroot.display())));
    let out = run(Command::new("unshare")
        .args(["--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs tmpfs "$1/boot" && "$2" deploy "$1" rhcos "$3""#)
        .arg("sh")
        .arg(&sysroot)
        .arg(client)
        .arg(&r.image));
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let deployment = sysroot.join(json["deployment"].as_str().unwrap());
    let os_release = std::fs::read_to_string(deployment.join("usr/lib/os-release")).unwrap();
    assert!(
        os_release.contains("OPENSHIFT_VERSION=\"4.13\""),
        "{os_release}"
    );
    assert!(deployment.join("usr/bin/kubelet").is_file());
    assert!(deployment.join("etc/openvswitch/system-id.conf").is_file());
}

#[test]
fn rebasing_on_the_z_stream_base_keeps_the_release_layer_on_the_new_base() {
    let (_, old_base, new_base) = bases();
    let w = workdir_with_base();
    let w = w.path();
    let on_old = derive_in(w, &[demo("ocp-4.13.yaml")], &[]).unwrap();
    let on_new = derive_on(w, &new_base.image_tag(), &[demo("ocp-4.13.yaml")], &[]).unwrap();
    assert!(on_new[0].changed);
    assert_ne!(
        on_new[0].version, on_old[0].version,
        "the version follows the base date"
    );
    let new_layers = layers(&inspect(w, &new_base.image_tag()));
    let rebased = layers(&inspect(w, &tag_of(&on_new[0])));
    assert_eq!(&rebased[..new_layers.len()], &new_layers[..]);
    assert_eq!(rebased.len(), new_layers.len() + 1);
    assert_eq!(on_new[0].base_commit, new_base.ostree_commit);
    assert_ne!(old_base.ostree_commit, new_base.ostree_commit);
}

/// The error of deriving, into the fresh workdir `fresh`, from the base
/// encapsulated again into `oci` under `tag` with the label
/// `name=value` added.
fn derive_from_labelled_base(
    oci: &Path,
    tag: &str,
    name: &str,
    value: &str,
    fresh: &Path,
) -> String {
    let (bw, b) = base();
    let mut eopts = strata_oscontainer::EncapsulateOptions::default();
    eopts.labels.insert(name.into(), value.into());
    strata_oscontainer::encapsulate(&bw.path().join("repo"), &b.ostree_commit, oci, tag, &eopts)
        .unwrap();
    format!(
        "{:#}",
        derive(
            &DeriveOptions::new(
                fresh,
                format!("oci:{}:{tag}", oci.display()),
                vec![demo("ocp-4.13.yaml")],
                worker()
            )
            .vars(vars())
        )
        .unwrap_err()
    )
}

/// A base image's labels are its builder's word: an `ostree.commit` or a
/// version with `../` would name a checkout or a build outside the
/// workdir. Each is refused naming the label and value, and a fresh
/// workdir in an empty directory is all that directory then holds.
#[test]
fn hostile_base_labels_are_refused_and_nothing_is_written_outside_the_workdir() {
    let elsewhere = tempfile::tempdir().unwrap();
    let oci = elsewhere.path().join("oci");
    for (name, value) in [
        ("ostree.commit", "../../../escaped"),
        ("org.opencontainers.image.version", "8.6/../../../escaped"),
        ("org.opencontainers.image.version", "8.6.1\nx"),
    ] {
        let around = tempfile::tempdir().unwrap();
        let fresh = around.path().join("a/work");
        let e = derive_from_labelled_base(&oci, "hostile", name, value, &fresh);
        assert!(e.contains(&format!("image label {name}={value:?}")), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let top: Vec<_> = std::fs::read_dir(around.path().join("a"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(top, ["work"], "{name}={value:?}");
        assert!(strata_oscontainer::list_tags(&fresh.join("oci"))
            .unwrap_or_default()
            .is_empty());
    }
}

/// derive took a base whose `com.coreos.osname` was a path and published
/// it unchanged in the derived image, where the disk stage and nodes
/// would take it as a stateroot directory: every label derive inherits is
/// checked as the disk stage checks it, and a refusal names the label.
#[test]
fn a_base_whose_osname_label_is_a_path_is_refused() {
    let elsewhere = tempfile::tempdir().unwrap();
    let oci = elsewhere.path().join("oci");
    for (name, value) in [
        ("com.coreos.osname", "../../../tmp/escaped"),
        ("com.coreos.osname", "/etc"),
        ("com.coreos.openshift-version", "4.13/../x"),
        ("ostree.linux", "../vmlinuz"),
    ] {
        let around = tempfile::tempdir().unwrap();
        let fresh = around.path().join("work");
        let e = derive_from_labelled_base(&oci, "hostile-inherited", name, value, &fresh);
        assert!(e.contains(&format!("image label {name}={value:?}")), "{e}");
        assert!(!e.contains('\n'), "{e}");
        assert!(strata_oscontainer::list_tags(&fresh.join("oci"))
            .unwrap_or_default()
            .is_empty());
    }
}

/// derive checked only the five labels strata reads and republished
/// every other label of the base as found (`description`,
/// `containers.bootc`, …), control characters and oversized values
/// included: every inherited label is checked, and a refusal names it,
/// escaped and cut, on one line.
#[test]
fn a_base_with_an_unfit_label_of_any_name_is_refused() {
    let elsewhere = tempfile::tempdir().unwrap();
    let oci = elsewhere.path().join("oci");
    let big = "x".repeat(5000);
    for (name, value, says) in [
        (
            "description",
            "RHCOS\n\x1b[2J",
            "label \"description\" has a control character",
        ),
        (
            "containers.bootc",
            "1\r",
            "label \"containers.bootc\" has a control character",
        ),
        (
            "description",
            big.as_str(),
            "label \"description\" has a value of 5000 bytes",
        ),
    ] {
        let around = tempfile::tempdir().unwrap();
        let fresh = around.path().join("work");
        let e = derive_from_labelled_base(&oci, "unfit", name, value, &fresh);
        assert!(e.contains(says), "{e}");
        assert!(!e.chars().any(char::is_control), "{e}");
        assert!(e.len() < 400, "{e}");
        assert!(strata_oscontainer::list_tags(&fresh.join("oci"))
            .unwrap_or_default()
            .is_empty());
    }
}

/// openshift-kubelet as CI rebuilds it on every merge (`n`: which merge),
/// with the files of [`rebuilt_kubelet`].
fn ci_kubelet(dir: &Path, n: u32) -> PathBuf {
    let release = format!("202612011200.p{n}.ci.el8");
    let mut p = PkgSpec::new("openshift-kubelet", "4.13.0", &release)
        .requires(&["cri-o", "cri-tools", "util-linux"])
        .files([
            FileSpec::file(
                "/usr/bin/kubelet",
                format!("#!/bin/sh\necho kubelet build {n}\n").into_bytes(),
                0o755,
            ),
            FileSpec::dir("/etc/kubernetes", 0o755),
        ]);
    p.build_time = 1_764_590_400;
    let path = dir.join(p.file_name());
    p.build(None, &path).unwrap();
    path
}

/// The initramfs cache's entries (`<key>/<names>.json`) with their inode
/// numbers: an entry is rewritten (a new inode) only when the generator
/// ran again.
fn initramfs_cache_entries(w: &Path) -> BTreeSet<(PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeSet::new();
    let Ok(keys) = std::fs::read_dir(w.join("cache/initramfs")) else {
        return out;
    };
    for key in keys.flatten().filter(|k| k.file_name() != "images") {
        for e in std::fs::read_dir(key.path()).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "json") {
                out.insert((e.path(), e.metadata().unwrap().ino()));
            }
        }
    }
    out
}

/// 4.13 with one more postprocess script.
fn ocp_413_then(dir: &Path, script: &str) -> PathBuf {
    manifest_over(
        dir,
        "ocp-4.13-changed.yaml",
        "ocp-4.13.yaml",
        &format!("postprocess:\n  - {script:?}\n"),
    )
}

/// The CI case: every merge of the kubelet repository derives 4.13 with
/// the new kubelet, which dracut never reads. The second build reuses the
/// initramfs the first made, and copies the first layer's gzip blocks,
/// and gives the image and commit that the same builds give with the
/// generator run again and every block deflated; a cached image that was
/// altered, and a change to what dracut reads (a module's script, a
/// program the initramfs holds), make it run again.
#[test]
fn a_kubelet_override_rebuild_reuses_the_initramfs_and_gives_the_same_bytes() {
    let rpms = tempfile::tempdir().unwrap();
    let kubelet = |n| vec![ci_kubelet(rpms.path(), n)];
    let ocp413 = || vec![demo("ocp-4.13.yaml")];
    let a = workdir_with_base();
    let a = a.path();
    let first = derive_in(a, &ocp413(), &kubelet(0)).unwrap().remove(0);
    assert!(meta_of(&first).initramfs.regenerated);
    let entries = initramfs_cache_entries(a);
    assert_eq!(entries.len(), 1, "one entry recorded: {entries:?}");

    let second = derive_in(a, &ocp413(), &kubelet(1)).unwrap().remove(0);
    assert!(second.changed && meta_of(&second).initramfs.regenerated);
    assert_eq!(
        initramfs_cache_entries(a),
        entries,
        "the entry matched: the generator did not run again"
    );
    let (_, image) = initramfs_of(a, &first.ostree_commit);
    assert_eq!(initramfs_of(a, &second.ostree_commit).1, image);

    // The second layer's gzip blocks were listed beside the first's, to be
    // copied by the next build.
    let listed = std::fs::read_dir(a.join("cache/gzip-blocks"))
        .unwrap()
        .count();
    assert_eq!(listed, 2, "one list per derived layer");

    // The same two builds in another workdir, the generator run for both
    // and every gzip block of the second layer deflated again.
    let b = workdir_with_base();
    let b = b.path();
    derive_in(b, &ocp413(), &kubelet(0)).unwrap();
    std::fs::remove_dir_all(b.join("cache/initramfs")).unwrap();
    std::fs::remove_dir_all(b.join("cache/gzip-blocks")).unwrap();
    let regenerated = derive_in(b, &ocp413(), &kubelet(1)).unwrap().remove(0);
    assert_eq!(initramfs_cache_entries(b).len(), 1, "recorded again");
    assert_eq!(
        (
            &regenerated.version,
            &regenerated.digest,
            &regenerated.ostree_commit
        ),
        (&second.version, &second.digest, &second.ostree_commit),
        "reused or made again, the same image and commit"
    );

    // An altered stored image is a miss, and is made and stored again.
    let images = a.join("cache/initramfs/images");
    let stored: Vec<PathBuf> = std::fs::read_dir(&images)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(stored.len(), 1);
    std::fs::write(&stored[0], b"not an initramfs").unwrap();
    let third = derive_in(a, &ocp413(), &kubelet(2)).unwrap().remove(0);
    assert_ne!(initramfs_cache_entries(a), entries, "the generator ran");
    assert_eq!(initramfs_of(a, &third.ostree_commit).1, image);
    let bytes = std::fs::read(&stored[0]).unwrap();
    assert_eq!(
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
        stored[0].file_name().unwrap().to_str().unwrap(),
        "stored again whole"
    );

    // A change dracut reads but that does not reach the image: a miss
    // that makes the same image.
    let entries = initramfs_cache_entries(a);
    let module = ocp_413_then(
        rpms.path(),
        "echo '# changed' >> /usr/lib/dracut/modules.d/99base/module-setup.sh",
    );
    let fourth = derive_in(a, &[module], &kubelet(3)).unwrap().remove(0);
    assert_ne!(initramfs_cache_entries(a), entries, "the generator ran");
    assert_eq!(initramfs_of(a, &fourth.ostree_commit).1, image);

    // A program the initramfs holds: a miss, and another image.
    let entries = initramfs_cache_entries(a);
    let program = ocp_413_then(
        rpms.path(),
        "printf '\\0' >> /usr/lib/ostree/ostree-prepare-root",
    );
    let fifth = derive_in(a, &[program], &kubelet(4)).unwrap().remove(0);
    assert_ne!(initramfs_cache_entries(a), entries, "the generator ran");
    assert_ne!(initramfs_of(a, &fifth.ostree_commit).1, image);
}

/// Snapshot A, then B, then A again made a third version of the base
/// (`-1`) and of each release, with new digests: the no-op check compared
/// only with the newest build. The third time finds A's builds in the
/// history, whole, and hands them back (`changed: false`, A's versions
/// and digests), as the streams' newest again.
#[test]
fn snapshot_a_then_b_then_a_again_gives_as_builds_back() {
    let (_, a, b) = bases();
    // derived() has the releases on A already: the first of A, B, A.
    let (_, on_a) = derived();
    let on_a = [on_a.iter().find(|r| r.release == "4.12").unwrap().clone()];
    let w = workdir_with_releases();
    let w = w.path();
    let history = |w: &Path| strata_workdir::history_of(w).unwrap();
    let newest_of = |w: &Path, stream: &str| {
        history(w)
            .into_iter()
            .rev()
            .find(|e| e.stream == stream)
            .unwrap()
    };
    // bases() built A then B in this workdir: A's inputs again.
    assert_eq!(newest_of(w, "rhel-8.6").version, b.version);
    let base_again = compose(
        &ComposeOptions::new(demo("rhel-8.6.yaml"), w, worker().arg("install"))
            .vars(vars())
            .source_date_epoch(None),
    )
    .unwrap();
    assert!(!base_again.changed, "A's base built again");
    assert_eq!(
        (
            &base_again.version,
            &base_again.digest,
            &base_again.ostree_commit
        ),
        (&a.version, &a.digest, &a.ostree_commit)
    );
    assert_eq!(newest_of(w, "rhel-8.6").version, a.version);
    assert_eq!(
        std::fs::read_link(w.join("builds/rhel-8.6/latest")).unwrap(),
        Path::new(&a.version)
    );
    let ostree_ref = run(Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args(["rev-parse", &base_again.ostree_ref]));
    assert_eq!(ostree_ref.trim(), a.ostree_commit);

    // The release on B, then on A again.
    let on_b = derive_on(w, &b.image_tag(), &[demo("ocp-4.12.yaml")], &[]).unwrap();
    assert!(on_b[0].changed);
    let again = derive_on(w, &a.image_tag(), &[demo("ocp-4.12.yaml")], &[]).unwrap();
    assert!(!again[0].changed, "the release on A built again");
    assert_eq!(
        (&again[0].version, &again[0].digest, &again[0].ostree_commit),
        (&on_a[0].version, &on_a[0].digest, &on_a[0].ostree_commit)
    );
    let newest = history(w).into_iter().last().unwrap();
    assert_eq!(
        (newest.stream, newest.version),
        (again[0].stream.clone(), on_a[0].version.clone())
    );
    let derived_ref = run(Command::new("ostree")
        .arg(format!("--repo={}", w.join("repo").display()))
        .args(["rev-parse", &again[0].ostree_ref]));
    assert_eq!(derived_ref.trim(), on_a[0].ostree_commit);

    // B's release with its layer's blob pruned away: built again, whole,
    // not handed back half.
    let info = inspect(w, &tag_of(&on_b[0]));
    let layer = info.layers.last().unwrap().digest.clone();
    std::fs::remove_file(
        w.join("oci/blobs/sha256")
            .join(layer.trim_start_matches("sha256:")),
    )
    .unwrap();
    let rebuilt = derive_on(w, &b.image_tag(), &[demo("ocp-4.12.yaml")], &[]).unwrap();
    assert!(rebuilt[0].changed, "B's release reused without its layer");
    let image = ImageRef::parse(&rebuilt[0].image, None).unwrap();
    assert_eq!(
        strata_oscontainer::verify(&image).unwrap(),
        rebuilt[0].digest
    );
}

/// The input hash changed with the order of a release's package names.
/// A package list is a set: the same release, no work.
#[test]
fn a_reordered_release_package_list_is_the_same_build() {
    let (_, first) = derived();
    let d = tempfile::tempdir().unwrap();
    let manifests = d.path().join("demo");
    run(Command::new("cp")
        .arg("-a")
        .arg(demo("ocp-4.13.yaml").parent().unwrap())
        .arg(&manifests));
    let path = manifests.join("ocp-4.13.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let (head, tail) = text.split_once("packages:\n").unwrap();
    let (block, rest) = tail.split_once("\n\n").unwrap();
    let mut names: Vec<&str> = block
        .lines()
        .filter_map(|l| l.strip_prefix("  -"))
        .flat_map(str::split_whitespace)
        .collect();
    assert!(names.len() > 1, "{block}");
    names.reverse();
    let list: String = names.iter().map(|n| format!("  - {n}\n")).collect();
    std::fs::write(&path, format!("{head}packages:\n{list}\n{rest}")).unwrap();
    let w = workdir_with_releases();
    let again = derive_in(w.path(), &[path], &[]).unwrap();
    let before = first.iter().find(|r| r.release == "4.13").unwrap();
    assert!(!again[0].changed, "a reordered package list rebuilt 4.13");
    assert_eq!(again[0].inputhash, before.inputhash);
    assert_eq!(
        (&again[0].version, &again[0].digest),
        (&before.version, &before.digest)
    );
}
