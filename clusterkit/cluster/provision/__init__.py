"""`up`, `down`, `plan`: observe the world, plan purely (plan/), apply exactly the plan; the stack, the launch, the bootstrap stage."""
