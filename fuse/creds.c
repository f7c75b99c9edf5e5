/* fuse/creds.c - credential sources for the mount (see creds.h).
 * Secrets are never logged; a passwd_file readable by others is refused,
 * as s3fs does. */
#include "fuse/creds.h"

#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Strips leading/trailing whitespace in place; returns the start. */
static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Sets both keys (copies; no session token); 0 or -ENOMEM. */
static int creds_set(struct fc_creds *c, const char *ak, const char *sk)
{
    fc_creds_fini(c);
    c->access_key = strdup(ak);
    c->secret_key = strdup(sk);
    if (c->access_key == NULL || c->secret_key == NULL) {
        fc_creds_fini(c);
        return -ENOMEM;
    }
    return 0;
}

/* One passwd_file line (see header). */
int fc_creds_parse_passwd_line(const char *line, const char *bucket,
                               struct fc_creds *out)
{
    char buf[1024], *s, *c1, *c2;
    int ret;

    if (strlen(line) >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, line, strlen(line) + 1);
    s = trim(buf);
    if (*s == '\0' || *s == '#')
        return 0;
    c1 = strchr(s, ':');
    if (c1 == NULL)
        return -EINVAL;
    *c1++ = '\0';
    c2 = strchr(c1, ':');
    if (c2 == NULL) {
        if (*s == '\0' || *c1 == '\0')
            return -EINVAL;
        ret = creds_set(out, s, c1); /* ACCESS:SECRET */
        return ret < 0 ? ret : 1;
    }
    *c2++ = '\0';
    if (*c1 == '\0' || *c2 == '\0')
        return -EINVAL;
    if (bucket && strcmp(s, bucket) != 0)
        return 0;
    ret = creds_set(out, c1, c2); /* BUCKET:ACCESS:SECRET */
    return ret < 0 ? ret : 1;
}

/* Reads a passwd_file: a BUCKET: line for our bucket wins over a plain
 * ACCESS:SECRET line. 0, or -errno with a message printed. */
static int read_passwd_file(const char *path, const char *bucket,
                            struct fc_creds *out)
{
    struct fc_creds plain = {0}, spec = {0};
    char line[1024];
    struct stat st;
    FILE *f;
    int ret = 0, lineno = 0;

    f = fopen(path, "r");
    if (f == NULL) {
        ret = -errno;
        fprintf(stderr, "ecfs: passwd_file %s: %s\n", path, strerror(-ret));
        return ret;
    }
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
        fprintf(stderr,
                "ecfs: passwd_file %s: readable by others "
                "(chmod 600 it)\n",
                path);
        fclose(f);
        return -EPERM;
    }
    while (fgets(line, sizeof(line), f)) {
        struct fc_creds c = {0};
        lineno++;
        /* a line with two colons names a bucket */
        bool named = strchr(line, ':') && strchr(strchr(line, ':') + 1, ':');
        ret = fc_creds_parse_passwd_line(line, bucket, &c);
        if (ret < 0) {
            fprintf(stderr,
                    "ecfs: passwd_file %s:%d: expected "
                    "ACCESS:SECRET or BUCKET:ACCESS:SECRET\n",
                    path, lineno);
            break;
        }
        if (ret == 1) {
            struct fc_creds *dst = named ? &spec : &plain;
            fc_creds_fini(dst);
            *dst = c;
        }
        ret = 0;
    }
    fclose(f);
    if (ret == 0) {
        if (spec.access_key) {
            *out = spec;
            spec = (struct fc_creds){0};
        } else if (plain.access_key) {
            *out = plain;
            plain = (struct fc_creds){0};
        } else {
            fprintf(stderr,
                    "ecfs: passwd_file %s: no credentials for "
                    "bucket %s\n",
                    path, bucket);
            ret = -ENOENT;
        }
    }
    fc_creds_fini(&spec);
    fc_creds_fini(&plain);
    return ret;
}

/* Sets the session token (a copy; NULL or "" = none). 0 or -ENOMEM. */
static int creds_set_token(struct fc_creds *c, const char *token)
{
    free(c->session_token);
    c->session_token = NULL;
    if (token == NULL || *token == '\0')
        return 0;
    c->session_token = strdup(token);
    return c->session_token ? 0 : -ENOMEM;
}

/* Reads an AWS credentials profile (see header). */
int fc_creds_read_profile(const char *path, const char *profile,
                          struct fc_creds *out)
{
    /* STS session tokens run to ~1-2 KiB: lines may be long */
    char line[8192], *ak = NULL, *sk = NULL, *tok = NULL;
    bool in = false, found = false;
    FILE *f = fopen(path, "r");
    int ret;

    if (f == NULL)
        return -ENOENT;
    while (fgets(line, sizeof(line), f)) {
        char *s = trim(line), *eq;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (e == NULL)
                continue;
            *e = '\0';
            s = trim(s + 1);
            if (strncmp(s, "profile ", 8) == 0)
                s = trim(s + 8);
            in = strcmp(s, profile) == 0;
            found |= in;
            continue;
        }
        if (!in || *s == '#' || *s == ';' || (eq = strchr(s, '=')) == NULL)
            continue;
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        if (strcmp(k, "aws_access_key_id") == 0) {
            free(ak);
            ak = strdup(v);
        } else if (strcmp(k, "aws_secret_access_key") == 0) {
            free(sk);
            sk = strdup(v);
        } else if (strcmp(k, "aws_session_token") == 0 ||
                   strcmp(k, "aws_security_token") == 0) {
            free(tok);
            tok = strdup(v);
        }
    }
    fclose(f);
    if (!found)
        ret = -ENOENT;
    else if (ak == NULL || sk == NULL || !*ak || !*sk)
        ret = -EINVAL;
    else if ((ret = creds_set(out, ak, sk)) == 0 &&
             (ret = creds_set_token(out, tok)) < 0)
        fc_creds_fini(out);
    free(ak);
    free(sk);
    free(tok);
    return ret;
}

/* Path of the shared credentials file; owned by the caller or NULL. */
static char *credentials_path(void)
{
    const char *e = getenv("AWS_SHARED_CREDENTIALS_FILE");
    const char *home = getenv("HOME");
    char *p = NULL;

    if (e && *e)
        return strdup(e);
    if (home == NULL) {
        /* mount(8) at boot runs us without HOME: ask the password db */
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : NULL;
    }
    if (home == NULL)
        return NULL;
    if (asprintf(&p, "%s/.aws/credentials", home) < 0)
        return NULL;
    return p;
}

/* Loads credentials in order of precedence (see header). */
int fc_creds_load(const char *passwd_file, const char *profile,
                  const char *bucket, struct fc_creds *out)
{
    const char *ak = getenv("AWS_ACCESS_KEY_ID");
    const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
    char *path;
    int ret;

    memset(out, 0, sizeof(*out));
    if (passwd_file)
        return read_passwd_file(passwd_file, bucket, out);
    if (profile == NULL && ak && *ak && sk && *sk) {
        ret = creds_set(out, ak, sk);
        if (ret == 0 &&
            (ret = creds_set_token(out, getenv("AWS_SESSION_TOKEN"))) < 0)
            fc_creds_fini(out);
        return ret;
    }
    if (profile == NULL)
        profile = getenv("AWS_PROFILE");
    path = credentials_path();
    ret = path ? fc_creds_read_profile(path, profile ? profile : "default", out)
               : -ENOENT;
    if (ret < 0 && profile != NULL) {
        fprintf(stderr, "ecfs: profile [%s] %s in %s\n", profile,
                ret == -ENOENT ? "not found" : "lacks keys",
                path ? path : "~/.aws/credentials");
    } else if (ret < 0) {
        ret = 0; /* nothing usable configured: anonymous */
    }
    free(path);
    return ret;
}

void fc_creds_fini(struct fc_creds *c)
{
    free(c->access_key);
    free(c->secret_key);
    free(c->session_token);
    c->access_key = c->secret_key = c->session_token = NULL;
}
