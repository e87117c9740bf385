/* Test program for `cargo xtask exec` and --share: prints a line and exits with 7. */
#include <stdio.h>

int main(int argc, char **argv)
{
	printf("hello from the guest, %d argument(s), last: %s\n", argc - 1, argv[argc - 1]);
	return 7;
}
