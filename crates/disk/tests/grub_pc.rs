//! strata's core.img against GRUB's own grub-mkimage, on the machine's
//! i386-pc directory (Debian's grub-pc-bin, which ci/install-deps installs).

use std::path::Path;
use std::process::Command;

use strata_disk::grub_pc::{core_img, payload, CORE_MODULES};

const DIR: &str = "/usr/lib/grub/i386-pc";
const PREFIX: &str = "(,gpt3)/grub2";

fn read(name: &str) -> anyhow::Result<Vec<u8>> {
    Ok(std::fs::read(Path::new(DIR).join(name))?)
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// The first `len` bytes a raw LZMA1 stream (lc 3, lp 0, pb 2) decodes to.
fn unlzma(data: &[u8], len: usize) -> Vec<u8> {
    use liblzma::stream::{Action, Stream};
    let mut s = Stream::new_raw_decoder(&strata_disk::grub_pc::lzma1_filters().unwrap()).unwrap();
    let mut out = Vec::with_capacity(len + 4096);
    // GRUB's stream has no end marker: decode until the size is reached.
    while out.len() < len {
        let consumed = s.total_in() as usize;
        let before = out.len();
        let _ = s.process_vec(&data[consumed..], &mut out, Action::Run);
        assert!(out.len() > before, "the stream ended after {before} bytes");
        out.reserve(4096);
    }
    out.truncate(len);
    out
}

/// The payload a core.img carries: sizes from its decompressor's fields.
fn carried(core: &[u8], decompressor_len: usize) -> Vec<u8> {
    let dec = &core[512..512 + decompressor_len];
    let (compressed, uncompressed) = (u32_at(dec, 0x08), u32_at(dec, 0x0c));
    let stream = &core[512 + decompressor_len..];
    assert_eq!(
        stream.len(),
        compressed,
        "the stream is the rest of the file"
    );
    unlzma(stream, uncompressed)
}

#[test]
fn core_img_carries_what_grub_mkimage_would() {
    assert!(
        Path::new(DIR).join("kernel.img").is_file(),
        "{DIR} missing: install the Debian package grub-pc-bin"
    );
    let dir = tempfile::tempdir().unwrap();
    let theirs_path = dir.path().join("core.img");
    strata_process::run(
        Command::new("grub-mkimage")
            .args(["-O", "i386-pc", "-d", DIR, "-p", PREFIX, "-o"])
            .arg(&theirs_path)
            .args(CORE_MODULES),
    )
    .expect("grub-mkimage (Debian package grub-common)");
    let theirs = std::fs::read(&theirs_path).unwrap();
    let ours = core_img(read, CORE_MODULES, PREFIX).unwrap();
    let dec_len = read("lzma_decompress.img").unwrap().len();

    // The same payload, byte for byte: kernel, module order, records.
    let expected = payload(&read, CORE_MODULES, PREFIX).unwrap();
    assert_eq!(carried(&theirs, dec_len), expected);
    assert_eq!(carried(&ours, dec_len), expected);

    // The same first sector and decompressor but for the sizes.
    assert_eq!(ours[..0x1fc], theirs[..0x1fc]);
    let sectors = u16::from_le_bytes([ours[0x1fc], ours[0x1fd]]) as usize;
    assert_eq!(sectors, (ours.len() - 512).div_ceil(512));
    assert_eq!(ours[0x1fe..512], theirs[0x1fe..512]);
    assert_eq!(ours[512..512 + 8], theirs[512..512 + 8]);
    assert_eq!(
        ours[512 + 0x10..512 + dec_len],
        theirs[512 + 0x10..512 + dec_len]
    );

    // Same inputs, same bytes.
    assert_eq!(core_img(read, CORE_MODULES, PREFIX).unwrap(), ours);
}

#[test]
fn a_missing_module_is_named() {
    let err = core_img(read, &["part_gpt", "no_such_module"], PREFIX).unwrap_err();
    assert!(format!("{err:#}").contains("no_such_module"), "{err:#}");
}

/// The El Torito image is what grub-mkimage's i386-pc-eltorito makes:
/// cdboot.img, then the core image (its first sector, decompressor and
/// the same payload).
#[test]
fn eltorito_img_is_grub_mkimages() {
    let modules = ["iso9660", "biosdisk"];
    let dir = tempfile::tempdir().unwrap();
    let theirs_path = dir.path().join("eltorito.img");
    strata_process::run(
        Command::new("grub-mkimage")
            .args([
                "-O",
                "i386-pc-eltorito",
                "-d",
                DIR,
                "-p",
                "/boot/grub2",
                "-o",
            ])
            .arg(&theirs_path)
            .args(modules),
    )
    .expect("grub-mkimage (Debian package grub-common)");
    let theirs = std::fs::read(&theirs_path).unwrap();
    let ours = strata_disk::grub_pc::eltorito_img(read, &modules, "/boot/grub2").unwrap();
    assert_eq!(ours[..2048], theirs[..2048], "cdboot.img");
    let dec_len = read("lzma_decompress.img").unwrap().len();
    let expected = payload(&read, &modules, "/boot/grub2").unwrap();
    assert_eq!(carried(&theirs[2048..], dec_len), expected);
    assert_eq!(carried(&ours[2048..], dec_len), expected);
    assert_eq!(ours[2048..2048 + 512], theirs[2048..2048 + 512]);
}
