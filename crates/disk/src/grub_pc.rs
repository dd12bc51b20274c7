//! GRUB's BIOS core image (`core.img`), assembled from the image's own
//! i386-pc files as grub2-install's image step assembles it.
//!
//! No package ships a core.img: RHEL's grub2-pc-modules ships the parts
//! (`kernel.img`, `lzma_decompress.img`, `diskboot.img`, the modules and
//! `moddep.lst` in `/usr/lib/grub/i386-pc`) and the installer joins them on
//! the machine. strata joins them itself, so the disk stage needs no GRUB
//! of its own and the image's GRUB is the one that boots, whatever its
//! version (the layout below is the same from GRUB 2.00 to 2.14):
//!
//! ```text
//! diskboot.img (one sector; its blocklist names the sectors after it)
//! lzma_decompress.img (patched: compressed and uncompressed sizes)
//! raw LZMA1 stream (lc 3, lp 0, pb 2) of the payload:
//!     kernel.img flattened (its sections placed at address - 0x9000)
//!     module info: magic "mimg", 12, size of the module area
//!     records {type u32, size u32 incl. header, data padded to 4}:
//!         each module (type 0), dependencies first; the prefix (type 3)
//! ```
//!
//! Everything read is untrusted: names are checked before they become
//! paths, sizes and offsets before they index. Pure: the caller reads the
//! files (see [`core_img`]'s `read`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, ensure, Context, Result};

/// Where RHEL's grub2-pc-modules (and Debian's grub-pc-bin) put the parts.
pub const MODULE_DIR: &str = "usr/lib/grub/i386-pc";
/// The package that ships [`MODULE_DIR`] on RHEL.
pub const MODULE_PACKAGE: &str = "grub2-pc-modules";

/// The modules CoreOS installs GRUB with (bootupd asks for `mdraid1x
/// part_gpt`), plus what grub2-install adds for an ext4 `/boot` on a GPT
/// disk read through the BIOS: the filesystem, the partition map, the disk.
pub const CORE_MODULES: &[&str] = &["mdraid1x", "part_gpt", "ext2", "part_gpt", "biosdisk"];

/// Where GRUB's kernel is linked and loaded.
const LINK_ADDR: u64 = 0x9000;
/// Its flattened image and bss must end below this address.
const KERNEL_LIMIT: u64 = 0x68000;
/// The decompressor runs at 0x8200 and must end before the kernel.
const MAX_DECOMPRESSOR: usize = 0xe00;
/// Decompressor and compressed payload must load below 0x78000.
const MAX_CORE: usize = 0x78000 - 0x9000;

const MODULE_MAGIC: u32 = 0x676d_696d;
const OBJ_ELF: u32 = 0;
const OBJ_PREFIX: u32 = 3;

// Fields of lzma_decompress.img.
const COMPRESSED_SIZE: usize = 0x08;
const UNCOMPRESSED_SIZE: usize = 0x0c;
// The first blocklist entry at the end of diskboot.img: its length.
const BLOCKLIST_LEN: usize = 0x1fc;

/// `core.img`, assembled from the files `read` returns (names relative to
/// [`MODULE_DIR`]): `modules` and their dependencies, with `prefix` (where
/// GRUB finds its configuration and further modules, e.g.
/// `(,gpt3)/grub2`) and no embedded configuration.
pub fn core_img(
    read: impl Fn(&str) -> Result<Vec<u8>>,
    modules: &[&str],
    prefix: &str,
) -> Result<Vec<u8>> {
    let rest = decompressor_and_payload(&read, modules, prefix)?;
    let mut diskboot = read("diskboot.img")?;
    ensure!(
        diskboot.len() == 512,
        "diskboot.img is {} bytes, not one 512-byte sector",
        diskboot.len()
    );
    let sectors = u16::try_from(rest.len().div_ceil(512)).context("core image too large")?;
    diskboot[BLOCKLIST_LEN..BLOCKLIST_LEN + 2].copy_from_slice(&sectors.to_le_bytes());
    let mut core = diskboot;
    core.extend_from_slice(&rest);
    Ok(core)
}

/// The El Torito boot image of a CD (what grub-mkimage's
/// `i386-pc-eltorito` format makes): `cdboot.img` (one 2048-byte CD
/// sector, which loads the rest by the size the El Torito boot info table
/// gives it) before a whole [`core_img`]. `prefix` without a device is
/// read from the medium GRUB booted from.
pub fn eltorito_img(
    read: impl Fn(&str) -> Result<Vec<u8>>,
    modules: &[&str],
    prefix: &str,
) -> Result<Vec<u8>> {
    let mut image = read("cdboot.img")?;
    ensure!(
        image.len() == 2048,
        "cdboot.img is {} bytes, not one 2048-byte CD sector",
        image.len()
    );
    image.extend_from_slice(&core_img(read, modules, prefix)?);
    Ok(image)
}

/// `lzma_decompress.img`, patched with the sizes, and the compressed
/// payload: what follows the first sector of every BIOS core image.
fn decompressor_and_payload(
    read: &impl Fn(&str) -> Result<Vec<u8>>,
    modules: &[&str],
    prefix: &str,
) -> Result<Vec<u8>> {
    let payload = payload(read, modules, prefix)?;
    let compressed = lzma1(&payload)?;
    let mut decompressor = read("lzma_decompress.img")?;
    ensure!(
        decompressor.len() > UNCOMPRESSED_SIZE + 4 && decompressor.len() <= MAX_DECOMPRESSOR,
        "lzma_decompress.img is {} bytes, not a GRUB decompressor (at most {MAX_DECOMPRESSOR})",
        decompressor.len()
    );
    put_u32(
        &mut decompressor,
        COMPRESSED_SIZE,
        len_u32(compressed.len())?,
    );
    put_u32(
        &mut decompressor,
        UNCOMPRESSED_SIZE,
        len_u32(payload.len())?,
    );
    let rest = decompressor.len() + compressed.len();
    ensure!(
        rest <= MAX_CORE,
        "the core image is {rest} bytes after its first sector, more than GRUB loads ({MAX_CORE})"
    );
    decompressor.extend_from_slice(&compressed);
    Ok(decompressor)
}

/// The uncompressed payload: the flattened kernel, then the module area.
pub fn payload(
    read: &impl Fn(&str) -> Result<Vec<u8>>,
    modules: &[&str],
    prefix: &str,
) -> Result<Vec<u8>> {
    ensure!(
        !prefix.contains('\0') && prefix.len() < 4096,
        "invalid GRUB prefix {prefix:?}"
    );
    let moddep = read("moddep.lst")?;
    let deps = parse_moddep(std::str::from_utf8(&moddep).context("moddep.lst is not UTF-8")?)?;
    let order = resolve(&deps, modules)?;
    let mut out = flatten_kernel(&read("kernel.img")?)?;
    let info = out.len();
    out.extend_from_slice(&MODULE_MAGIC.to_le_bytes());
    out.extend_from_slice(&12u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // area size, set below
    for name in &order {
        let data = read(&format!("{name}.mod")).with_context(|| format!("GRUB module {name}"))?;
        record(&mut out, OBJ_ELF, &data)?;
    }
    let mut prefix = prefix.as_bytes().to_vec();
    prefix.push(0);
    record(&mut out, OBJ_PREFIX, &prefix)?;
    let area = len_u32(out.len() - info)?;
    put_u32(&mut out, info + 8, area);
    Ok(out)
}

/// One module record: header (type, size including the header), the data
/// padded with zeros to a multiple of 4.
fn record(out: &mut Vec<u8>, kind: u32, data: &[u8]) -> Result<()> {
    let padded = data.len().div_ceil(4) * 4;
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&len_u32(padded + 8)?.to_le_bytes());
    out.extend_from_slice(data);
    out.resize(out.len() + padded - data.len(), 0);
    Ok(())
}

/// `moddep.lst`: `name: dep dep…` per line.
fn parse_moddep(text: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let mut deps = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((name, rest)) = line.split_once(':') else {
            bail!("moddep.lst:{}: no ':' in {line:?}", i + 1);
        };
        let name = module_name(name.trim()).with_context(|| format!("moddep.lst:{}", i + 1))?;
        let list = rest
            .split_whitespace()
            .map(|d| module_name(d).map(str::to_string))
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("moddep.lst:{}", i + 1))?;
        deps.insert(name.to_string(), list);
    }
    Ok(deps)
}

/// A module name as GRUB's build writes them: it becomes a file name.
fn module_name(name: &str) -> Result<&str> {
    ensure!(
        !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        "invalid GRUB module name {name:?}"
    );
    Ok(name)
}

/// The modules to embed, in grub-mkimage's order: each requested module
/// after its dependencies (a line's dependencies taken last to first),
/// each once, the request order kept otherwise.
fn resolve(deps: &BTreeMap<String, Vec<String>>, modules: &[&str]) -> Result<Vec<String>> {
    fn add(
        name: &str,
        deps: &BTreeMap<String, Vec<String>>,
        visiting: &mut BTreeSet<String>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) -> Result<()> {
        if seen.contains(name) {
            return Ok(());
        }
        ensure!(
            visiting.insert(name.to_string()),
            "moddep.lst: {name} depends on itself"
        );
        for d in deps.get(name).into_iter().flatten().rev() {
            add(d, deps, visiting, seen, order)?;
        }
        visiting.remove(name);
        seen.insert(name.to_string());
        order.push(name.to_string());
        Ok(())
    }
    let (mut visiting, mut seen, mut order) = (BTreeSet::new(), BTreeSet::new(), Vec::new());
    for m in modules {
        add(module_name(m)?, deps, &mut visiting, &mut seen, &mut order)?;
    }
    Ok(order)
}

/// kernel.img (an ELF32 executable linked at 0x9000) as the flat image the
/// decompressor jumps to: its allocated PROGBITS sections at their address
/// less 0x9000, gaps zero; the bss must still fit below GRUB's limit.
fn flatten_kernel(elf: &[u8]) -> Result<Vec<u8>> {
    ensure!(
        elf.len() >= 52 && elf[..4] == *b"\x7fELF" && elf[4] == 1 && elf[5] == 1,
        "kernel.img is not a 32-bit little-endian ELF file"
    );
    let shoff = u64::from(u32_at(elf, 0x20)?);
    let shentsize = u64::from(u16_at(elf, 0x2e)?);
    let shnum = u64::from(u16_at(elf, 0x30)?);
    ensure!(shentsize >= 40, "kernel.img: section headers too small");
    const PROGBITS: u32 = 1;
    const NOBITS: u32 = 8;
    const ALLOC: u32 = 2;
    const EXEC: u32 = 4;
    let mut image: Vec<u8> = Vec::new();
    let mut bss_end = 0u64;
    for i in 0..shnum {
        let h = usize::try_from(shoff + i * shentsize).context("kernel.img: section table")?;
        let kind = u32_at(elf, h + 4)?;
        let flags = u32_at(elf, h + 8)?;
        let addr = u64::from(u32_at(elf, h + 12)?);
        let offset = u64::from(u32_at(elf, h + 16)?);
        let size = u64::from(u32_at(elf, h + 20)?);
        if flags & ALLOC == 0 || size == 0 {
            continue;
        }
        ensure!(
            addr >= LINK_ADDR && addr + size <= KERNEL_LIMIT,
            "kernel.img: section {i} at {addr:#x} is outside GRUB's kernel area"
        );
        let at = usize::try_from(addr - LINK_ADDR)?;
        let len = usize::try_from(size)?;
        match kind {
            PROGBITS => {
                if flags & EXEC != 0 {
                    ensure!(
                        addr == LINK_ADDR,
                        "kernel.img: code section {i} at {addr:#x}, not {LINK_ADDR:#x}"
                    );
                }
                let start = usize::try_from(offset)?;
                let data = elf
                    .get(start..start + len)
                    .with_context(|| format!("kernel.img: section {i} beyond the file"))?;
                if image.len() < at + len {
                    image.resize(at + len, 0);
                }
                image[at..at + len].copy_from_slice(data);
            }
            NOBITS => bss_end = bss_end.max(addr + size),
            _ => {}
        }
    }
    ensure!(!image.is_empty(), "kernel.img has no code");
    ensure!(
        bss_end <= KERNEL_LIMIT,
        "kernel.img: its bss ends at {bss_end:#x}, beyond {KERNEL_LIMIT:#x}"
    );
    Ok(image)
}

/// A raw LZMA1 stream with the properties GRUB's decompressor is built for
/// (lc 3, lp 0, pb 2); it decodes exactly the uncompressed size it is told,
/// so the end marker liblzma writes is never read.
fn lzma1(data: &[u8]) -> Result<Vec<u8>> {
    use liblzma::stream::{Action, Status, Stream};
    let mut stream = Stream::new_raw_encoder(&lzma1_filters()?)?;
    let mut out = Vec::with_capacity(data.len() / 2 + 4096);
    loop {
        let consumed = usize::try_from(stream.total_in())?;
        if stream.process_vec(&data[consumed..], &mut out, Action::Finish)? == Status::StreamEnd {
            return Ok(out);
        }
        out.reserve(out.capacity().max(4096));
    }
}

/// The raw LZMA1 filter GRUB's decompressor reads: lc 3, lp 0, pb 2 (its
/// window is the output buffer, so the dictionary size is free; GRUB's own
/// tool uses 64 KiB).
pub fn lzma1_filters() -> Result<liblzma::stream::Filters> {
    let mut opts = liblzma::stream::LzmaOptions::new_preset(6)?;
    opts.dict_size(1 << 16)
        .literal_context_bits(3)
        .literal_position_bits(0)
        .position_bits(2);
    let mut filters = liblzma::stream::Filters::new();
    filters.lzma1(&opts);
    Ok(filters)
}

fn len_u32(n: usize) -> Result<u32> {
    u32::try_from(n).context("GRUB image part larger than 4 GiB")
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    let s = b.get(at..at + 4).context("kernel.img is truncated")?;
    Ok(u32::from_le_bytes(s.try_into()?))
}

fn u16_at(b: &[u8], at: usize) -> Result<u16> {
    let s = b.get(at..at + 2).context("kernel.img is truncated")?;
    Ok(u16::from_le_bytes(s.try_into()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deps(text: &str) -> BTreeMap<String, Vec<String>> {
        parse_moddep(text).unwrap()
    }

    #[test]
    fn dependencies_come_first_last_listed_first_each_once() {
        let d = deps(
            "ext2: fshelp\nmdraid1x: diskfilter\npart_gpt:\nbiosdisk:\nfshelp:\na: b c\nb:\nc: b\n",
        );
        assert_eq!(
            resolve(&d, CORE_MODULES).unwrap(),
            [
                "diskfilter",
                "mdraid1x",
                "part_gpt",
                "fshelp",
                "ext2",
                "biosdisk"
            ]
        );
        assert_eq!(resolve(&d, &["a"]).unwrap(), ["b", "c", "a"]);
    }

    #[test]
    fn hostile_module_lists_are_refused() {
        assert!(parse_moddep("../x: y\n").is_err());
        assert!(parse_moddep("x: ../../etc/passwd\n").is_err());
        assert!(parse_moddep("no colon\n").is_err());
        assert!(resolve(&deps("a: b\nb: a\n"), &["a"]).is_err());
        assert!(resolve(&deps(""), &["a/b"]).is_err());
    }

    #[test]
    fn records_are_padded_and_sized_with_their_header() {
        let mut out = Vec::new();
        record(&mut out, OBJ_PREFIX, b"(,gpt3)/grub2\0").unwrap();
        assert_eq!(out.len(), 8 + 16);
        assert_eq!(u32_at(&out, 0).unwrap(), OBJ_PREFIX);
        assert_eq!(u32_at(&out, 4).unwrap(), 24);
    }

    #[test]
    fn a_kernel_that_is_not_grubs_is_refused() {
        assert!(flatten_kernel(b"").is_err());
        assert!(flatten_kernel(&[0u8; 64]).is_err());
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x01\x01");
        // A section table far beyond the file.
        elf[0x20..0x24].copy_from_slice(&0xffff_0000u32.to_le_bytes());
        elf[0x2e..0x30].copy_from_slice(&40u16.to_le_bytes());
        elf[0x30..0x32].copy_from_slice(&1u16.to_le_bytes());
        assert!(flatten_kernel(&elf).is_err());
    }
}
