/* The headers strata's libdnf wrapper binds to. libdnf.h pulls in every public
 * C header (dnf-context.h, hy-goal.h, hy-query.h, ...); the rpm headers give
 * the keyring calls used for per-repository signature checks. */
#include <libdnf/libdnf.h>
#include <rpm/rpmkeyring.h>
#include <rpm/rpmmacro.h>
