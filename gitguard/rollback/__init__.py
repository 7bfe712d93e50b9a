"""Rolling files back without destroying a user edit: writer, patches, conflicts."""
