"""The fit search: the preset in llama.cpp's vocabulary that fits a device with the least quality lost."""
