/*
 * libnss_altfiles.so.2 for the fixture distribution: the NSS service
 * "altfiles" that RHCOS's nsswitch.conf names ("passwd: files altfiles"),
 * reading the users and groups an ostree system keeps under /usr/lib
 * (/usr/lib/passwd, /usr/lib/group) with glibc's own file parsers.
 * Debian has no package of it, so the fixture builds it from this file;
 * real glibc tools (getent, useradd) load it the way they load RHEL's.
 */
#include <errno.h>
#include <grp.h>
#include <nss.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#define PASSWD_FILE "/usr/lib/passwd"
#define GROUP_FILE "/usr/lib/group"

/* What every lookup returns: glibc's parser result mapped to NSS. */
static enum nss_status status_of(int rc, int *errnop)
{
	if (rc == 0)
		return NSS_STATUS_SUCCESS;
	if (rc == ERANGE) {
		*errnop = ERANGE;
		return NSS_STATUS_TRYAGAIN;
	}
	*errnop = ENOENT;
	return NSS_STATUS_NOTFOUND;
}

static FILE *pw_stream;
static FILE *gr_stream;

static enum nss_status open_stream(FILE **stream, const char *path)
{
	if (*stream == NULL)
		*stream = fopen(path, "re");
	else
		rewind(*stream);
	return *stream ? NSS_STATUS_SUCCESS : NSS_STATUS_UNAVAIL;
}

static void close_stream(FILE **stream)
{
	if (*stream)
		fclose(*stream);
	*stream = NULL;
}

enum nss_status _nss_altfiles_setpwent(int stayopen)
{
	(void)stayopen;
	return open_stream(&pw_stream, PASSWD_FILE);
}

enum nss_status _nss_altfiles_endpwent(void)
{
	close_stream(&pw_stream);
	return NSS_STATUS_SUCCESS;
}

enum nss_status _nss_altfiles_getpwent_r(struct passwd *pw, char *buf, size_t len, int *errnop)
{
	struct passwd *out;
	if (pw_stream == NULL && open_stream(&pw_stream, PASSWD_FILE) != NSS_STATUS_SUCCESS)
		return NSS_STATUS_UNAVAIL;
	return status_of(fgetpwent_r(pw_stream, pw, buf, len, &out), errnop);
}

/* One pass over the passwd file until `match` accepts an entry. */
static enum nss_status find_pw(int (*match)(const struct passwd *, const void *), const void *key,
			       struct passwd *pw, char *buf, size_t len, int *errnop)
{
	struct passwd *out;
	enum nss_status st = NSS_STATUS_NOTFOUND;
	int rc;
	FILE *f = fopen(PASSWD_FILE, "re");
	if (f == NULL) {
		*errnop = errno;
		return NSS_STATUS_UNAVAIL;
	}
	while ((rc = fgetpwent_r(f, pw, buf, len, &out)) == 0) {
		if (match(pw, key)) {
			st = NSS_STATUS_SUCCESS;
			break;
		}
	}
	if (rc != 0)
		st = status_of(rc, errnop);
	fclose(f);
	return st;
}

static int pw_name_is(const struct passwd *pw, const void *key)
{
	return strcmp(pw->pw_name, key) == 0;
}

static int pw_uid_is(const struct passwd *pw, const void *key)
{
	return pw->pw_uid == *(const uid_t *)key;
}

enum nss_status _nss_altfiles_getpwnam_r(const char *name, struct passwd *pw, char *buf, size_t len,
					 int *errnop)
{
	return find_pw(pw_name_is, name, pw, buf, len, errnop);
}

enum nss_status _nss_altfiles_getpwuid_r(uid_t uid, struct passwd *pw, char *buf, size_t len,
					 int *errnop)
{
	return find_pw(pw_uid_is, &uid, pw, buf, len, errnop);
}

enum nss_status _nss_altfiles_setgrent(int stayopen)
{
	(void)stayopen;
	return open_stream(&gr_stream, GROUP_FILE);
}

enum nss_status _nss_altfiles_endgrent(void)
{
	close_stream(&gr_stream);
	return NSS_STATUS_SUCCESS;
}

enum nss_status _nss_altfiles_getgrent_r(struct group *gr, char *buf, size_t len, int *errnop)
{
	struct group *out;
	if (gr_stream == NULL && open_stream(&gr_stream, GROUP_FILE) != NSS_STATUS_SUCCESS)
		return NSS_STATUS_UNAVAIL;
	return status_of(fgetgrent_r(gr_stream, gr, buf, len, &out), errnop);
}

static enum nss_status find_gr(int (*match)(const struct group *, const void *), const void *key,
			       struct group *gr, char *buf, size_t len, int *errnop)
{
	struct group *out;
	enum nss_status st = NSS_STATUS_NOTFOUND;
	int rc;
	FILE *f = fopen(GROUP_FILE, "re");
	if (f == NULL) {
		*errnop = errno;
		return NSS_STATUS_UNAVAIL;
	}
	while ((rc = fgetgrent_r(f, gr, buf, len, &out)) == 0) {
		if (match(gr, key)) {
			st = NSS_STATUS_SUCCESS;
			break;
		}
	}
	if (rc != 0)
		st = status_of(rc, errnop);
	fclose(f);
	return st;
}

static int gr_name_is(const struct group *gr, const void *key)
{
	return strcmp(gr->gr_name, key) == 0;
}

static int gr_gid_is(const struct group *gr, const void *key)
{
	return gr->gr_gid == *(const gid_t *)key;
}

enum nss_status _nss_altfiles_getgrnam_r(const char *name, struct group *gr, char *buf, size_t len,
					 int *errnop)
{
	return find_gr(gr_name_is, name, gr, buf, len, errnop);
}

enum nss_status _nss_altfiles_getgrgid_r(gid_t gid, struct group *gr, char *buf, size_t len,
					 int *errnop)
{
	return find_gr(gr_gid_is, &gid, gr, buf, len, errnop);
}
