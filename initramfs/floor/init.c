/* The floor: a bare static /init that says one line and reboots at once. Booting it
 * measures what the kernel and QEMU cost without the agent (see BENCHMARKS.md). */
#include <sys/reboot.h>
#include <unistd.h>

int main(void)
{
	static const char msg[] = "floor-init: rebooting\n";
	write(1, msg, sizeof(msg) - 1);
	reboot(RB_AUTOBOOT);
	return 0;
}
