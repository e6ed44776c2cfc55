package main

import (
	"context"

	"github.com/nodepack/nodepack/resources"
	"github.com/spf13/pflag"
)

// nodeOptions say which node to describe: this one (detected), or one
// saved with detect --json; --gpus and --cpus narrow either.
type nodeOptions struct {
	Inventory string
	GPUs      string
	CPUs      string
}

func (o *nodeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Inventory, "inventory", "", "describe the node saved in `FILE` (from detect --json) instead of this one")
	fs.StringVar(&o.GPUs, "gpus", "", "use only these GPUs: indices, ranges, GPU-/MIG- UUIDs, or 'none' (`LIST`)")
	fs.StringVar(&o.CPUs, "cpus", "", "use only these CPUs, e.g. 0-15,32-47 (`LIST`)")
}

// load returns the node: detected, or read from the inventory file, then
// narrowed by --gpus and --cpus. Every error is the user's input.
func (o *nodeOptions) load(ctx context.Context) (resources.Node, error) {
	if o.Inventory == "" {
		return resources.Detect(ctx, resources.Options{GPUs: o.GPUs, CPUs: o.CPUs})
	}
	n, err := resources.ReadInventory(o.Inventory)
	if err != nil {
		return n, err
	}
	return n.Select(o.GPUs, o.CPUs)
}
