"""Economics: offers and prices (on-demand, spot, reserved), the cost of a plan as line
items, on-premises TCO and break-evens, energy and carbon."""
