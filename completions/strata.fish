# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_strata_global_optspecs
    string join \n v/verbose q/quiet log-format= h/help V/version
end

function __fish_strata_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_strata_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_strata_using_subcommand
    set -l cmd (__fish_strata_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c strata -n "__fish_strata_needs_command" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_needs_command" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_needs_command" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_needs_command" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_needs_command" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_needs_command" -f -a "fixture" -d 'Generate the fixture RPM distribution (offline, signed, bootable)'
complete -c strata -n "__fish_strata_needs_command" -f -a "demo" -d 'Run the whole pipeline on the fixture distribution (the embedded default)'
complete -c strata -n "__fish_strata_needs_command" -f -a "compose" -d 'Compose the base image of a base manifest from RHEL-only inputs'
complete -c strata -n "__fish_strata_needs_command" -f -a "derive" -d 'Derive one image per OpenShift release manifest from a base image'
complete -c strata -n "__fish_strata_needs_command" -f -a "build" -d 'Run a pipeline: compose, derive every release, disks, push, run.json'
complete -c strata -n "__fish_strata_needs_command" -f -a "disk" -d 'Build bootable disk images (qcow2, raw, 4K raw) of an image'
complete -c strata -n "__fish_strata_needs_command" -f -a "node" -d 'Update or roll back a node\'s disk image offline, as the node would'
complete -c strata -n "__fish_strata_needs_command" -f -a "inspect" -d 'Show an image: labels, version, layers with sizes and components, packages'
complete -c strata -n "__fish_strata_needs_command" -f -a "diff" -d 'Compare two images: packages added, removed, changed; layers shared; download size'
complete -c strata -n "__fish_strata_needs_command" -f -a "push" -d 'Push an image to a registry (docker://HOST/NAME:TAG) with skopeo'
complete -c strata -n "__fish_strata_needs_command" -f -a "list" -d 'List a workdir\'s builds per stream (newest first), runs and disk use'
complete -c strata -n "__fish_strata_needs_command" -f -a "prune" -d 'Remove all but the newest N builds of each stream: records, tags, disks, blobs, ostree objects'
complete -c strata -n "__fish_strata_needs_command" -f -a "__install-worker" -d 'Internal: the worker process of `compose` (the package install)'
complete -c strata -n "__fish_strata_needs_command" -f -a "__derive-worker" -d 'Internal: the worker process of `derive` (one release\'s install)'
complete -c strata -n "__fish_strata_needs_command" -f -a "__disk-worker" -d 'Internal: the worker process of `disk` (the namespaced deployment)'
complete -c strata -n "__fish_strata_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c strata -n "__fish_strata_using_subcommand fixture" -l out -d 'Directory to generate into (reused when already current)' -r -F
complete -c strata -n "__fish_strata_using_subcommand fixture" -l scale -d 'Add N synthetic packages with a realistic size spread (benchmarks), or `rhcos`: as many, as large and with as many files as make the composed base the size of a real RHCOS base (docs/fixture.md)' -r
complete -c strata -n "__fish_strata_using_subcommand fixture" -l flavour -d 'Which distribution to imitate: rhel-8.6 (OpenShift 4.12), rhel-9.6 (OpenShift 4.19 and 4.20) or c9s (CentOS Stream 9, OKD)' -r
complete -c strata -n "__fish_strata_using_subcommand fixture" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand fixture" -l json -d 'Print one JSON object describing the fixture on stdout'
complete -c strata -n "__fish_strata_using_subcommand fixture" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand fixture" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand fixture" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand demo" -l workdir -d 'Working directory: fixture, repositories, images, builds' -r -F
complete -c strata -n "__fish_strata_using_subcommand demo" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand demo" -l json -d 'Print one JSON object (the build\'s, plus the fixture and layer bytes)'
complete -c strata -n "__fish_strata_using_subcommand demo" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand demo" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand demo" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand compose" -l workdir -d 'Working directory: cache, ostree repo, OCI images, build history' -r -F
complete -c strata -n "__fish_strata_using_subcommand compose" -l lockfile -d 'Compose exactly the packages of this lockfile (strata\'s or rpm-ostree\'s)' -r -F
complete -c strata -n "__fish_strata_using_subcommand compose" -l overrides -d 'An overrides file (a lockfile, JSON or YAML, such as manifest-lock.overrides.yaml): its packages win over the lockfile\'s by name; without --lockfile, they pin the versions of the packages the manifest installs. Repeatable, later files win' -r -F
complete -c strata -n "__fish_strata_using_subcommand compose" -l var -d 'Set a manifest variable: `${KEY}` in the manifest becomes VALUE' -r
complete -c strata -n "__fish_strata_using_subcommand compose" -l push -d 'Push the base image to docker://HOST/NAME:TAG (skipped when the registry already has its digest there)' -r
complete -c strata -n "__fish_strata_using_subcommand compose" -l tls-verify -d 'Require HTTPS and verify certificates for docker:// references (`--tls-verify=false` for a local registry)' -r -f -a "true\t''
false\t''"
complete -c strata -n "__fish_strata_using_subcommand compose" -l authfile -d 'A containers-auth.json with registry credentials' -r -F
complete -c strata -n "__fish_strata_using_subcommand compose" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand compose" -l json -d 'Print one JSON object with the result on stdout'
complete -c strata -n "__fish_strata_using_subcommand compose" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand compose" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand compose" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand derive" -l workdir -d 'Working directory: cache, ostree repo, OCI images, build history' -r -F
complete -c strata -n "__fish_strata_using_subcommand derive" -l base -d 'The base image: a tag in the workdir, oci:DIR:TAG or docker://HOST/NAME:TAG' -r
complete -c strata -n "__fish_strata_using_subcommand derive" -l override-rpm -d 'Use this locally built RPM instead of the repos\' package of the same name (repeatable; bypasses the signature rule, recorded in the image)' -r -F
complete -c strata -n "__fish_strata_using_subcommand derive" -l var -d 'Set a manifest variable: `${KEY}` in the manifest becomes VALUE' -r
complete -c strata -n "__fish_strata_using_subcommand derive" -l push -d 'Push each derived image to docker://HOST/NAME:TAG; `{release}` in DEST becomes the OpenShift release (required with several manifests)' -r
complete -c strata -n "__fish_strata_using_subcommand derive" -l tls-verify -d 'Require HTTPS and verify certificates for docker:// references (`--tls-verify=false` for a local registry)' -r -f -a "true\t''
false\t''"
complete -c strata -n "__fish_strata_using_subcommand derive" -l authfile -d 'A containers-auth.json with registry credentials' -r -F
complete -c strata -n "__fish_strata_using_subcommand derive" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand derive" -l json -d 'Print one JSON object with the result on stdout'
complete -c strata -n "__fish_strata_using_subcommand derive" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand derive" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand derive" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand build" -l workdir -d 'Working directory: cache, ostree repo, OCI images, build history' -r -F
complete -c strata -n "__fish_strata_using_subcommand build" -l var -d 'Set a variable: over the pipeline\'s defaults, passed to every manifest' -r
complete -c strata -n "__fish_strata_using_subcommand build" -l tls-verify -d 'Require HTTPS and verify certificates for docker:// references (`--tls-verify=false` for a local registry)' -r -f -a "true\t''
false\t''"
complete -c strata -n "__fish_strata_using_subcommand build" -l authfile -d 'A containers-auth.json with registry credentials' -r -F
complete -c strata -n "__fish_strata_using_subcommand build" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand build" -l push -d 'Push every image that has a `push:` target in the pipeline'
complete -c strata -n "__fish_strata_using_subcommand build" -l json -d 'Print one JSON object with the result on stdout'
complete -c strata -n "__fish_strata_using_subcommand build" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand build" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand build" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand disk" -l workdir -d 'Working directory: cache, ostree repo, OCI images, build history' -r -F
complete -c strata -n "__fish_strata_using_subcommand disk" -l image -d 'The image: a tag in the workdir, oci:DIR:TAG or docker://HOST/NAME:TAG' -r
complete -c strata -n "__fish_strata_using_subcommand disk" -l platform -d 'Platforms, comma-separated: qemu, metal, metal4k, live (the live ISO and PXE files)' -r
complete -c strata -n "__fish_strata_using_subcommand disk" -l target-image -d 'The reference nodes upgrade from (where the image is published), recorded in the deployment\'s origin and the aleph file instead of --image: with it, the same image gives the same disk bytes on any machine' -r
complete -c strata -n "__fish_strata_using_subcommand disk" -l size-mib -d 'Disk size in MiB instead of the content plus headroom' -r
complete -c strata -n "__fish_strata_using_subcommand disk" -l compress -d 'Store the disks gzip-compressed, as published images are (gzip), or as written, ready to boot (none)' -r
complete -c strata -n "__fish_strata_using_subcommand disk" -l artifact-url -d 'Where the build directory will be published: stream.json locations become URL/STREAM/VERSION/x86_64/FILE. At most 2048 characters, no user or password, no `.` or `..` segment' -r
complete -c strata -n "__fish_strata_using_subcommand disk" -l tls-verify -d 'Require HTTPS and verify certificates for docker:// references (`--tls-verify=false` for a local registry)' -r -f -a "true\t''
false\t''"
complete -c strata -n "__fish_strata_using_subcommand disk" -l authfile -d 'A containers-auth.json with registry credentials' -r -F
complete -c strata -n "__fish_strata_using_subcommand disk" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand disk" -l json -d 'Print one JSON object with the result on stdout'
complete -c strata -n "__fish_strata_using_subcommand disk" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand disk" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand disk" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand node; and not __fish_seen_subcommand_from update rollback help" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand node; and not __fish_seen_subcommand_from update rollback help" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand node; and not __fish_seen_subcommand_from update rollback help" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand node; and not __fish_seen_subcommand_from update rollback help" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand node; and not __fish_seen_subcommand_from update rollback help" -f -a "update" -d 'Deploy an image into a raw disk image as the node would on update (the image becomes the default, the current deployment the rollback)'
complete -c strata -n "__fish_strata_using_subcommand node; and not __fish_seen_subcommand_from update rollback help" -f -a "rollback" -d 'Make the rollback deployment of a raw disk image the default'
complete -c strata -n "__fish_strata_using_subcommand node; and not __fish_seen_subcommand_from update rollback help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -l workdir -d 'Working directory holding (or receiving) the image' -r -F
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -l image -d 'The image: a tag in the workdir, oci:DIR:TAG or docker://HOST/NAME:TAG' -r
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -l tls-verify -d 'Require HTTPS and verify certificates for docker:// references (`--tls-verify=false` for a local registry)' -r -f -a "true\t''
false\t''"
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -l authfile -d 'A containers-auth.json with registry credentials' -r -F
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -l json -d 'Print one JSON object with the result on stdout'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from update" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from rollback" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from rollback" -l json -d 'Print one JSON object with the result on stdout'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from rollback" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from rollback" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from rollback" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "update" -d 'Deploy an image into a raw disk image as the node would on update (the image becomes the default, the current deployment the rollback)'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "rollback" -d 'Make the rollback deployment of a raw disk image the default'
complete -c strata -n "__fish_strata_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c strata -n "__fish_strata_using_subcommand inspect" -l workdir -d 'Working directory whose OCI store holds images named by a bare tag' -r -F
complete -c strata -n "__fish_strata_using_subcommand inspect" -l tls-verify -d 'Require HTTPS and verify certificates for docker:// references (`--tls-verify=false` for a local registry)' -r -f -a "true\t''
false\t''"
complete -c strata -n "__fish_strata_using_subcommand inspect" -l authfile -d 'A containers-auth.json with registry credentials' -r -F
complete -c strata -n "__fish_strata_using_subcommand inspect" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand inspect" -l json -d 'Print one JSON object on stdout'
complete -c strata -n "__fish_strata_using_subcommand inspect" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand inspect" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand inspect" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand diff" -l workdir -d 'Working directory whose OCI store holds images named by a bare tag' -r -F
complete -c strata -n "__fish_strata_using_subcommand diff" -l tls-verify -d 'Require HTTPS and verify certificates for docker:// references (`--tls-verify=false` for a local registry)' -r -f -a "true\t''
false\t''"
complete -c strata -n "__fish_strata_using_subcommand diff" -l authfile -d 'A containers-auth.json with registry credentials' -r -F
complete -c strata -n "__fish_strata_using_subcommand diff" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand diff" -l json -d 'Print one JSON object on stdout'
complete -c strata -n "__fish_strata_using_subcommand diff" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand diff" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand diff" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand push" -l workdir -d 'Working directory whose OCI store holds images named by a bare tag' -r -F
complete -c strata -n "__fish_strata_using_subcommand push" -l tls-verify -d 'Require HTTPS and verify certificates for docker:// references (`--tls-verify=false` for a local registry)' -r -f -a "true\t''
false\t''"
complete -c strata -n "__fish_strata_using_subcommand push" -l authfile -d 'A containers-auth.json with registry credentials' -r -F
complete -c strata -n "__fish_strata_using_subcommand push" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand push" -l json -d 'Print one JSON object on stdout'
complete -c strata -n "__fish_strata_using_subcommand push" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand push" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand push" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand list" -l workdir -d 'Working directory: cache, ostree repo, OCI images, build history' -r -F
complete -c strata -n "__fish_strata_using_subcommand list" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand list" -l json -d 'Print one JSON object on stdout'
complete -c strata -n "__fish_strata_using_subcommand list" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand list" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand list" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand prune" -l workdir -d 'Working directory: cache, ostree repo, OCI images, build history' -r -F
complete -c strata -n "__fish_strata_using_subcommand prune" -l keep -d 'How many builds of each stream (and runs of each pipeline) to keep, newest first; builds a kept run names are kept too' -r
complete -c strata -n "__fish_strata_using_subcommand prune" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand prune" -l dry-run -d 'Say what would be removed, remove nothing'
complete -c strata -n "__fish_strata_using_subcommand prune" -l json -d 'Print one JSON object on stdout'
complete -c strata -n "__fish_strata_using_subcommand prune" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand prune" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand prune" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand __install-worker" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand __install-worker" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand __install-worker" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand __install-worker" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand __derive-worker" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand __derive-worker" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand __derive-worker" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand __derive-worker" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand __disk-worker" -l log-format -d 'Log lines as text, or as one JSON object per line (for CI log collectors)' -r -f -a "text\t''
json\t''"
complete -c strata -n "__fish_strata_using_subcommand __disk-worker" -s v -l verbose -d 'More detail in the logs: -v strata\'s debug lines (every external command line, each stage\'s time), -vv everything at trace, the libraries\' too. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand __disk-worker" -s q -l quiet -d 'Less: -q warnings and errors only, -qq errors only. Overrides RUST_LOG'
complete -c strata -n "__fish_strata_using_subcommand __disk-worker" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "fixture" -d 'Generate the fixture RPM distribution (offline, signed, bootable)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "demo" -d 'Run the whole pipeline on the fixture distribution (the embedded default)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "compose" -d 'Compose the base image of a base manifest from RHEL-only inputs'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "derive" -d 'Derive one image per OpenShift release manifest from a base image'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "build" -d 'Run a pipeline: compose, derive every release, disks, push, run.json'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "disk" -d 'Build bootable disk images (qcow2, raw, 4K raw) of an image'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "node" -d 'Update or roll back a node\'s disk image offline, as the node would'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "inspect" -d 'Show an image: labels, version, layers with sizes and components, packages'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "diff" -d 'Compare two images: packages added, removed, changed; layers shared; download size'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "push" -d 'Push an image to a registry (docker://HOST/NAME:TAG) with skopeo'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "list" -d 'List a workdir\'s builds per stream (newest first), runs and disk use'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "prune" -d 'Remove all but the newest N builds of each stream: records, tags, disks, blobs, ostree objects'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "__install-worker" -d 'Internal: the worker process of `compose` (the package install)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "__derive-worker" -d 'Internal: the worker process of `derive` (one release\'s install)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "__disk-worker" -d 'Internal: the worker process of `disk` (the namespaced deployment)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from fixture demo compose derive build disk node inspect diff push list prune __install-worker __derive-worker __disk-worker help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c strata -n "__fish_strata_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "update" -d 'Deploy an image into a raw disk image as the node would on update (the image becomes the default, the current deployment the rollback)'
complete -c strata -n "__fish_strata_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "rollback" -d 'Make the rollback deployment of a raw disk image the default'
