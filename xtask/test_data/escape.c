/*
 * The guest side of the virtiofsd sandbox check: plants symlinks and `..` paths in a shared
 * folder that point at a host file outside it, then tries to read and overwrite that file
 * through each of them.
 *
 *   escape SHARE HOST_FILE REL SECRET
 *
 * SHARE is the folder in the guest; HOST_FILE is the host file's absolute path on the host,
 * and REL its path relative to the shared folder on the host (`../../../canary.txt`). Exits 3
 * when any read returned SECRET, 0 otherwise; prints what each attempt did. The host checks
 * the rest (the file unchanged, what the daemon itself can reach).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[4096];

static const char *at(const char *share, const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", share, name);
	return path;
}

static int plant(const char *target, const char *share, const char *name)
{
	if (symlink(target, at(share, name)) != 0) {
		printf("symlink %s -> %s: %s\n", name, target, strerror(errno));
		return 1;
	}
	printf("planted %s -> %s\n", name, target);
	return 0;
}

/* 1 when the file read through `p` holds the secret. */
static int try_read(const char *p, const char *secret)
{
	char buf[256] = { 0 };
	int fd = open(p, O_RDONLY);
	if (fd < 0) {
		printf("read %s: %s\n", p, strerror(errno));
		return 0;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	int leaked = n > 0 && strstr(buf, secret) != NULL;
	printf("read %s: %zd bytes%s\n", p, n, leaked ? ", THE HOST SECRET" : "");
	return leaked;
}

static void try_write(const char *p)
{
	int fd = open(p, O_WRONLY | O_TRUNC);
	if (fd < 0) {
		printf("write %s: %s\n", p, strerror(errno));
		return;
	}
	ssize_t n = write(fd, "overwritten by the guest\n", 25);
	close(fd);
	printf("write %s: %zd bytes (into whatever the guest resolved)\n", p, n);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: escape SHARE HOST_FILE REL SECRET\n");
		return 2;
	}
	const char *share = argv[1], *host = argv[2], *rel = argv[3], *secret = argv[4];
	const char *base = strrchr(host, '/') ? strrchr(host, '/') + 1 : host;
	char deep[4096];
	snprintf(deep, sizeof(deep), "../../../../../../../../..%s", host);

	int bad = 0;
	bad |= plant(host, share, "abs");
	bad |= plant(rel, share, "rel");
	bad |= plant(deep, share, "deep");
	bad |= plant("..", share, "up");
	bad |= plant("/", share, "root");
	if (mkdir(at(share, "d"), 0755) != 0)
		bad = 1;
	bad |= plant("../../..", share, "d/up3");
	if (bad)
		return 1;

	int leaked = 0;
	const char *names[] = { "abs", "rel", "deep" };
	for (unsigned i = 0; i < 3; i++) {
		leaked |= try_read(at(share, names[i]), secret);
		try_write(at(share, names[i]));
	}
	char p[4096];
	snprintf(p, sizeof(p), "%s/up/../%s", share, base);
	leaked |= try_read(p, secret);
	snprintf(p, sizeof(p), "%s/root%s", share, host);
	leaked |= try_read(p, secret);
	try_write(p);
	snprintf(p, sizeof(p), "%s/d/up3/%s", share, base);
	leaked |= try_read(p, secret);
	snprintf(p, sizeof(p), "%s/%s", share, rel);
	leaked |= try_read(p, secret);
	fflush(stdout);
	return leaked ? 3 : 0;
}
