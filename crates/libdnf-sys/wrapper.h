/* The headers strata's libdnf wrapper binds to. libdnf.h pulls in every public
 * C header (dnf-context.h, hy-goal.h, hy-query.h, ...); the rpm headers give
 * the keyring calls used for per-repository signature checks, and rpmlog's
 * saved records, through which a transaction's scriptlet failures are seen
 * (printed to a stdio stream). */
#include <stdio.h>
#include <libdnf/libdnf.h>
#include <rpm/rpmkeyring.h>
#include <rpm/rpmmacro.h>
#include <rpm/rpmlog.h>
