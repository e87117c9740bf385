#include <stdlib.h>
static int del(int x)
{
	if (x > 2)
		return 1;
	return 0;
}

static int reg(int x)
{
	int r = 0;
	for (int i = 0; i < x; i++)
		r += i;
	return r;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	if (n == 7)
		return del(n);
	return reg(n) & 1;
}
