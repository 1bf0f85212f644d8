"""Episodes: one MCAP file per `act` goal, and the tools that read them."""
