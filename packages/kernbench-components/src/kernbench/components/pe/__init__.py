"""The nine blocks of a PE (MMU and IPCQ behaviour arrive with later issues)."""
