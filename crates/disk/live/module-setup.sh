#!/bin/bash
# shellcheck disable=SC2154 # moddir, initdir and the unit directories are dracut's
# strata's live-media dracut module. `strata disk --platform live` adds it
# (`dracut --add strata-live`, run with the image's own dracut, kernel and
# configuration) to the initramfs of the live ISO and PXE media only; the
# image itself never carries it.
#
# The live root: the media's rootfs.img holds root.squashfs, the deployment's
# physical root (/ostree with the deployment, as on a disk). It is mounted
# read-only, a tmpfs overlay on top is /sysroot, and ostree-prepare-root
# makes the deployment the root as it does on a disk. Where the squashfs comes
# from:
# - PXE: rootfs.img is a second initrd, so the kernel unpacks /root.squashfs
#   into the initramfs itself;
# - ISO: `strata.live.iso=<volume id>` names the medium; rootfs.img is read
#   from it in place (the squashfs starts 124 bytes in, after its cpio header).

check() {
    # Only when asked for.
    return 255
}

depends() {
    echo systemd
    return 0
}

installkernel() {
    hostonly='' instmods squashfs loop overlay isofs sr_mod
}

install() {
    inst_multiple mount umount mkdir cp cat
    # Loaded before anything mounts: nothing opens /dev/loop-control to
    # load loop on demand.
    mkdir -p "$initdir/etc/modules-load.d"
    printf '%s\n' loop squashfs overlay >"$initdir/etc/modules-load.d/strata-live.conf"
    inst_script "$moddir/strata-live-generator" \
        "$systemdutildir/system-generators/strata-live-generator"
    inst_script "$moddir/strata-live-cmdline" /usr/libexec/strata-live-cmdline
    # Ignition's hook for live systems: no root disk to partition or mount.
    inst_script "$moddir/is-live-image" /usr/bin/is-live-image
    inst_simple "$moddir/strata-live-rw.service" \
        "$systemdsystemunitdir/strata-live-rw.service"
    inst_simple "$moddir/strata-live-ignition.service" \
        "$systemdsystemunitdir/strata-live-ignition.service"
    mkdir -p "$initdir$systemdsystemunitdir/initrd.target.wants"
    ln_r "$systemdsystemunitdir/strata-live-ignition.service" \
        "$systemdsystemunitdir/initrd.target.wants/strata-live-ignition.service"
    # ostree-prepare-root finds the deployment itself: the media carry one,
    # and PXE users pass no ostree= argument.
    inst_simple "$moddir/ostree-prepare-root.conf" \
        "$systemdsystemunitdir/ostree-prepare-root.service.d/strata-live.conf"
    # Ignition writes into the live root once it is prepared (on a disk,
    # ignition-mount orders it; a live system has none).
    inst_simple "$moddir/ignition-files.conf" \
        "$systemdsystemunitdir/ignition-files.service.d/strata-live.conf"
}
