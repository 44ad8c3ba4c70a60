"""Partition state (leader epoch, LEO, HW, ISR), the replica manager and the purgatories."""
