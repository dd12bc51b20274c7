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
        _ => bail!(
            "usage: strata-ostree-ext-compat import REPO IMAGE [--insecure] | deploy SYSROOT STATEROOT IMAGE"
        ),
    }
}
