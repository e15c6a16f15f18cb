"""A toy area: does a least-squares line predict a noisy linear signal better than its mean?"""
