//! `strata-ostree-ext-compat`: imports a container image with ostree-ext, the
//! library bootc and rpm-ostree use, and prints what it got.
//!
//! strata-oscontainer's tests run this against the images strata writes, so a
//! change that breaks real clients fails a test. It must stay a thin driver
//! of ostree-ext: any logic here would weaken the check.
//!
//! Usage:
//!   strata-ostree-ext-compat import REPO IMAGE [--insecure]
//!     IMAGE is a containers-image reference (`oci:DIR:TAG`,
//!     `docker://HOST/NAME:TAG`). REPO is created (bare-user) if missing.
//!     Prints one JSON object: base_commit, merge_commit, base_tree,
//!     merge_tree, manifest_digest.
//!   strata-ostree-ext-compat deploy SYSROOT STATEROOT IMAGE
//!     Deploys IMAGE into an initialized sysroot (`ostree admin init-fs`,
//!     `os-init`) as bootc/rpm-ostree do; prints base_commit, merge_commit,
//!     deployment (its directory relative to SYSROOT).
//!   strata-ostree-ext-compat encapsulate REPO REV IMAGE COMPONENTS OBJECTS [PRIOR]
//!     Encapsulates commit REV with ostree-ext's own chunking, as
//!     rpm-ostree's `compose container-encapsulate` does: COMPONENTS lines
//!     are `NAME<TAB>CHANGE_FREQUENCY`, OBJECTS lines `CHECKSUM<TAB>NAME`;
//!     PRIOR is the previous build's image manifest (JSON), whose layer
//!     annotations ostree-ext keeps packages in. Prints the manifest digest.
//!     strata's benchmark runs it against strata's encapsulation.

use anyhow::{bail, Context, Result};
use ostree_ext::container::store::{ImageImporter, ImageProxyConfig, PrepareResult};
use ostree_ext::container::{OstreeImageReference, SignatureSource};
use ostree_ext::gio;
use ostree_ext::ostree;

fn root_tree(repo: &ostree::Repo, commit: &str) -> Result<String> {
    let (v, _) = repo.load_commit(commit)?;
    let contents = v.child_value(6).data_as_bytes();
    let meta = v.child_value(7).data_as_bytes();
    Ok(format!("{}:{}", hex(&contents), hex(&meta)))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

async fn import(repo_path: &str, image: &str, insecure: bool) -> Result<()> {
    let path = std::path::Path::new(repo_path);
    let repo = if path.join("config").exists() {
        ostree::Repo::open_at(libc_at_fdcwd(), repo_path, gio::Cancellable::NONE)?
    } else {
        std::fs::create_dir_all(path)?;
        ostree::Repo::create_at(
            libc_at_fdcwd(),
            repo_path,
            ostree::RepoMode::BareUser,
            None,
            gio::Cancellable::NONE,
        )?
    };
    let imgref = OstreeImageReference {
        sigverify: SignatureSource::ContainerPolicyAllowInsecure,
        imgref: image.try_into().with_context(|| format!("parsing {image}"))?,
    };
    let mut config = ImageProxyConfig::default();
    if insecure {
        config.insecure_skip_tls_verification = Some(true);
    }
    let mut importer = ImageImporter::new(&repo, &imgref, config).await?;
    let prep = match importer.prepare().await? {
        PrepareResult::AlreadyPresent(_) => bail!("image already present in {repo_path}"),
        PrepareResult::Ready(p) => p,
    };
    let state = importer.import(prep).await?;
    println!(
        "{{\"base_commit\":\"{}\",\"merge_commit\":\"{}\",\"base_tree\":\"{}\",\"merge_tree\":\"{}\",\"manifest_digest\":\"{}\"}}",
        state.base_commit,
        state.merge_commit,
        root_tree(&repo, &state.base_commit)?,
        root_tree(&repo, &state.merge_commit)?,
        state.manifest_digest
    );
    Ok(())
}

async fn deploy(sysroot_path: &str, stateroot: &str, image: &str) -> Result<()> {
    let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(sysroot_path)));
    sysroot.load(gio::Cancellable::NONE)?;
    let imgref = OstreeImageReference {
        sigverify: SignatureSource::ContainerPolicyAllowInsecure,
        imgref: image.try_into().with_context(|| format!("parsing {image}"))?,
    };
    let state = ostree_ext::container::deploy::deploy(&sysroot, stateroot, &imgref, None).await?;
    sysroot.load(gio::Cancellable::NONE)?;
    let deployments = sysroot.deployments();
    let d = deployments
        .first()
        .ok_or_else(|| anyhow::anyhow!("no deployment after deploy"))?;
    println!(
        "{{\"base_commit\":\"{}\",\"merge_commit\":\"{}\",\"deployment_commit\":\"{}\",\"deployment\":\"{}\"}}",
        state.base_commit,
        state.merge_commit,
        d.csum(),
        sysroot.deployment_dirpath(d)
    );
    Ok(())
}

async fn encapsulate(
    repo_path: &str,
    rev: &str,
    image: &str,
    components: &str,
    objects: &str,
    prior: Option<&str>,
) -> Result<()> {
    use ostree_ext::chunking::ObjectMetaSized;
    use ostree_ext::objectsource::{ObjectMeta, ObjectSourceMeta};
    let repo = ostree::Repo::open_at(libc_at_fdcwd(), repo_path, gio::Cancellable::NONE)?;
    let read = |path: &str| -> Result<Vec<(String, String)>> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect())
    };
    let mut meta = ObjectMeta::default();
    for (name, frequency) in read(components)? {
        let id: std::rc::Rc<str> = name.into();
        meta.set.insert(ObjectSourceMeta {
            identifier: id.clone(),
            name: id.clone(),
            srcid: id,
            change_time_offset: 1,
            change_frequency: frequency.parse().context("change frequency")?,
        });
    }
    for (checksum, name) in read(objects)? {
        meta.map.insert(checksum, name.into());
    }
    let sized = ObjectMetaSized::compute_sizes(&repo, meta)?;
    let prior = prior
        .map(ostree_ext::oci_spec::image::ImageManifest::from_file)
        .transpose()
        .context("reading the prior manifest")?;
    let mut opts = ostree_ext::container::ExportOpts::default();
    opts.contentmeta = Some(&sized);
    opts.prior_build = prior.as_ref();
    let dest: ostree_ext::container::ImageReference = image
        .try_into()
        .with_context(|| format!("parsing {image}"))?;
    let config = ostree_ext::container::Config::default();
    let digest = ostree_ext::container::encapsulate(&repo, rev, &config, Some(opts), &dest).await?;
    println!("{digest}");
    Ok(())
}

fn libc_at_fdcwd() -> i32 {
    ostree::AT_FDCWD
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["import", repo, image] => import(repo, image, false).await,
        ["import", repo, image, "--insecure"] => import(repo, image, true).await,
        ["deploy", sysroot, stateroot, image] => deploy(sysroot, stateroot, image).await,
        ["encapsulate", repo, rev, image, components, objects] => {
            encapsulate(repo, rev, image, components, objects, None).await
        }
        ["encapsulate", repo, rev, image, components, objects, prior] => {
            encapsulate(repo, rev, image, components, objects, Some(prior)).await
        }
        _ => bail!(
            "usage: strata-ostree-ext-compat import REPO IMAGE [--insecure] | deploy SYSROOT STATEROOT IMAGE | encapsulate REPO REV IMAGE COMPONENTS OBJECTS [PRIOR]"
        ),
    }
}
