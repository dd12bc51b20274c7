//! The platforms a disk can be built for, as data.
//!
//! A platform is a row: its `ignition.platform.id`, console kernel
//! arguments, GRUB console commands, output format, sector size and an
//! optional fixed disk size. Adding aws (vmdk), azure (vhd) or gcp (tar.gz)
//! is one more row plus, for a new format, the `qemu-img` options in
//! [`Format`]. Nothing here touches the filesystem.

use anyhow::{bail, Result};

/// How an artifact is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The raw disk itself.
    Raw,
    /// `qemu-img convert -O qcow2`.
    Qcow2,
}

impl Format {
    /// The name used in metadata (`formats.<name>` of stream metadata).
    pub fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Qcow2 => "qcow2",
        }
    }

    /// `qemu-img convert` arguments producing this format from raw; `None`
    /// when the raw disk is the artifact.
    pub fn qemu_img_args(self) -> Option<&'static [&'static str]> {
        match self {
            Format::Raw => None,
            Format::Qcow2 => Some(&["-O", "qcow2"]),
        }
    }
}

/// One row of the platform table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// `ignition.platform.id`, and the name in artifact file names.
    pub name: &'static str,
    /// The name in stream metadata's `artifacts` (metal4k is a format of metal).
    pub stream_platform: &'static str,
    /// The format name in stream metadata (`4k.raw` for metal4k).
    pub stream_format: &'static str,
    pub format: Format,
    /// Logical sector size of the disk: 512 or 4096.
    pub sector_size: u64,
    /// A disk size the platform requires (bytes), instead of content + headroom.
    pub fixed_size: Option<u64>,
    /// Console kernel arguments; the serial console last so it is /dev/console.
    pub console_kargs: &'static [&'static str],
    /// GRUB commands run before the menu (consoles).
    pub grub_commands: &'static [&'static str],
}

const SERIAL_CONSOLE: &[&str] = &["console=tty0", "console=ttyS0,115200n8"];
const SERIAL_GRUB: &[&str] = &[
    "serial --speed=115200",
    "terminal_input serial console",
    "terminal_output serial console",
];

/// Every platform strata can build.
pub const PLATFORMS: &[Platform] = &[
    Platform {
        name: "qemu",
        stream_platform: "qemu",
        stream_format: "qcow2",
        format: Format::Qcow2,
        sector_size: 512,
        fixed_size: None,
        console_kargs: SERIAL_CONSOLE,
        grub_commands: SERIAL_GRUB,
    },
    Platform {
        name: "metal",
        stream_platform: "metal",
        stream_format: "raw",
        format: Format::Raw,
        sector_size: 512,
        fixed_size: None,
        console_kargs: SERIAL_CONSOLE,
        grub_commands: SERIAL_GRUB,
    },
    Platform {
        name: "metal4k",
        stream_platform: "metal",
        stream_format: "4k.raw",
        format: Format::Raw,
        sector_size: 4096,
        fixed_size: None,
        console_kargs: SERIAL_CONSOLE,
        grub_commands: SERIAL_GRUB,
    },
];

impl Platform {
    /// The table row named `name`.
    pub fn get(name: &str) -> Result<&'static Platform> {
        match PLATFORMS.iter().find(|p| p.name == name) {
            Some(p) => Ok(p),
            None => bail!(
                "unknown platform {name:?} (known: {}, {})",
                PLATFORMS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
                crate::live::LIVE
            ),
        }
    }

    /// The `ignition.platform.id` and console arguments of this platform.
    pub fn kargs(&self) -> Vec<String> {
        std::iter::once(format!("ignition.platform.id={}", self.name))
            .chain(self.console_kargs.iter().map(|s| s.to_string()))
            .collect()
    }

    /// The artifact's file extension.
    pub fn extension(&self) -> &'static str {
        self.format.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lookups() {
        assert_eq!(Platform::get("metal4k").unwrap().sector_size, 4096);
        assert_eq!(Platform::get("qemu").unwrap().extension(), "qcow2");
        let err = Platform::get("aws").unwrap_err().to_string();
        assert!(err.contains("unknown platform \"aws\""), "{err}");
        assert!(err.contains("qemu, metal, metal4k"), "{err}");
        let kargs = Platform::get("metal").unwrap().kargs();
        assert_eq!(kargs[0], "ignition.platform.id=metal");
        assert!(kargs.last().unwrap().starts_with("console=ttyS0"));
    }
}
