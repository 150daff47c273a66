"""What the group and transaction coordinators share: the runtime that runs their pure cores."""
