"""The client side of the daemon's socket."""
