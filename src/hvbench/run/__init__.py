"""Running studies: the runner, the lab session, scenarios and the cell kinds."""
