"""paperline's stage code: `core` is shared plumbing, every other package is one data area."""
