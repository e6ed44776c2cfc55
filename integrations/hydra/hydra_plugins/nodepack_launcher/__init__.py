"""hydra/launcher=nodepack: Hydra multiruns through the nodepack binary."""
