package resources

import (
	"fmt"
	"strings"
)

// sysfsPCIDir turns NVML's bus id ("00000000:07:00.0", upper case, 8-digit
// domain) into the sysfs directory of the device
// ("sys/bus/pci/devices/0000:07:00.0"); "" when the id does not parse.
func sysfsPCIDir(busID string) string {
	var domain, bus, device, function uint
	if _, err := fmt.Sscanf(strings.ToLower(busID), "%x:%x:%x.%x", &domain, &bus, &device, &function); err != nil {
		return ""
	}
	return fmt.Sprintf("sys/bus/pci/devices/%04x:%02x:%02x.%x", domain, bus, device, function)
}
